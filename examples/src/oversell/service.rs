//! The inventory service: `POST /items/{id}/buy` reads the stock, checks it, writes it back.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use lock_core::LockClient;
use lock_tower::DistributedLockLayer;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use super::{Error, Guard, Settings};

/// The Redis key of an item's stock.
pub(crate) fn stock_key(item: u64) -> String {
    format!("demo:stock:{item}")
}

#[derive(Clone)]
struct App {
    redis: MultiplexedConnection,
    local: Option<Arc<Mutex<()>>>,
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
    let buy = post(buy).with_state(App { redis, local });
    let router = Router::new().route("/items/{id}/buy", buy);
    Ok(match guard {
        Guard::LocalMutex => router,
        Guard::Distributed => {
            let layer = DistributedLockLayer::builder(LockClient::new(url)?)
                .route("/items/{id}/buy")
                .key("item_<id:u64>") // as `Path<u64>` reads it: `08` is item 8
                .wait(settings.lock_wait)
                .build()?;
            router.route_layer(layer)
        }
    })
}

/// Sells one unit if there is stock. The read and the write are separate commands, with an
/// await between them — the window in which another instance sells the same unit.
async fn buy(State(app): State<App>, Path(id): Path<u64>) -> (StatusCode, &'static str) {
    let _local = match &app.local {
        Some(mutex) => Some(mutex.lock().await),
        None => None,
    };
    let mut redis = app.redis.clone();
    let key = stock_key(id);
    let Ok(stock) = redis.get::<_, i64>(&key).await else {
        return (StatusCode::SERVICE_UNAVAILABLE, "redis error");
    };
    if stock <= 0 {
        return (StatusCode::GONE, "sold out");
    }
    tokio::task::yield_now().await;
    match redis.set::<_, _, ()>(&key, stock - 1).await {
        Ok(()) => (StatusCode::OK, "bought"),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "redis error"),
    }
}
