//! The inventory service: `POST /items/{id}/buy` reads the stock, checks it, writes it back
//! — or, under [`Guard::Guarded`], takes one with a guarded `DECR`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use lock_core::{current_lock, LockClient, OnLost};
use lock_tower::lock::DistributedLockLayer;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use super::{Error, Guard, Settings};

/// The lock name of an item, as the layer's key template makes it.
const LOCK_KEY: &str = "item_<id:u64>";

/// The Redis key of an item's stock: under [`Guard::Guarded`] beside its lock, in the lock's
/// slot (`LockInfo::key("stock")`, the client's default key prefix).
pub(crate) fn stock_key(item: u64, guard: Guard) -> String {
    match guard {
        Guard::Guarded => format!("{{distlock:item_{item}}}:stock"),
        _ => format!("demo:stock:{item}"),
    }
}

#[derive(Clone)]
struct App {
    redis: MultiplexedConnection,
    local: Option<Arc<Mutex<()>>>,
    guard: Guard,
    /// Purchases seen, for the stall of one in ten.
    seen: Arc<AtomicUsize>,
    stall: Option<Duration>,
}

impl App {
    /// Stalls one purchase in ten between its check and its write, when asked to.
    async fn maybe_stall(&self) {
        let nth = self.seen.fetch_add(1, Ordering::Relaxed);
        match self.stall {
            Some(stall) if nth % 10 == 9 => tokio::time::sleep(stall).await,
            _ => tokio::task::yield_now().await,
        }
    }
}

/// One running instance; stops serving when dropped.
pub(crate) struct Instance {
    addr: SocketAddr,
    server: JoinHandle<()>,
}

impl Instance {
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Starts `settings.instances` instances on free loopback ports, each with its own Redis
/// connection and, when locking, its own `LockClient`.
pub(crate) async fn start(
    url: &str,
    settings: &Settings,
    guard: Guard,
) -> Result<Vec<Instance>, Error> {
    let mut instances = Vec::with_capacity(settings.instances);
    for _ in 0..settings.instances {
        let redis = redis::Client::open(url)?
            .get_multiplexed_async_connection()
            .await?;
        let router = router(url, settings, guard, redis)?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        instances.push(Instance { addr, server });
    }
    Ok(instances)
}

fn router(
    url: &str,
    settings: &Settings,
    guard: Guard,
    redis: MultiplexedConnection,
) -> Result<Router, Error> {
    let local = (guard == Guard::LocalMutex).then(|| Arc::new(Mutex::new(())));
    let app = App {
        redis,
        local,
        guard,
        seen: Arc::default(),
        stall: settings.stall,
    };
    let buy = post(buy).with_state(app);
    let router = Router::new().route("/items/{id}/buy", buy);
    if guard == Guard::LocalMutex {
        return Ok(router);
    }
    let layer = DistributedLockLayer::builder(LockClient::new(url)?)
        .route("/items/{id}/buy")
        .key(LOCK_KEY) // as `Path<u64>` reads it: `08` is item 8
        .wait(settings.lock_wait);
    // A stalled holder's lease runs out; it does not notice, as a paused process would not.
    let layer = match settings.stall {
        Some(stall) => layer.lease(stall / 3).on_lost(OnLost::Continue),
        None => layer,
    };
    Ok(router.route_layer(layer.build()?))
}

/// Sells one unit if there is stock. The read and the write are separate commands, with an
/// await between them — the window in which another instance sells the same unit.
async fn buy(State(app): State<App>, Path(id): Path<u64>) -> (StatusCode, &'static str) {
    let _local = match &app.local {
        Some(mutex) => Some(mutex.lock().await),
        None => None,
    };
    let mut redis = app.redis.clone();
    let key = stock_key(id, app.guard);
    let Ok(stock) = redis.get::<_, i64>(&key).await else {
        return (StatusCode::SERVICE_UNAVAILABLE, "redis error");
    };
    if stock <= 0 {
        return (StatusCode::GONE, "sold out");
    }
    app.maybe_stall().await;
    if app.guard == Guard::Guarded {
        return take_one(&key).await;
    }
    match redis.set::<_, _, ()>(&key, stock - 1).await {
        Ok(()) => (StatusCode::OK, "bought"),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "redis error"),
    }
}

/// One guarded `DECR` of the stock under the request's hold: it commits only while the hold
/// is current, so a holder that stalled past its lease sells nothing.
async fn take_one(key: &str) -> (StatusCode, &'static str) {
    let Some(lock) = current_lock() else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "no lock");
    };
    let mut decr = redis::pipe();
    decr.cmd("DECR").arg(key);
    match lock.write::<(i64,)>(&decr).await {
        Ok((left,)) if left >= 0 => (StatusCode::OK, "bought"),
        Ok(_) => (StatusCode::INTERNAL_SERVER_ERROR, "oversold"),
        Err(e) if e.is_lost() => (StatusCode::SERVICE_UNAVAILABLE, "lock lost: not sold"),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "redis error"),
    }
}
