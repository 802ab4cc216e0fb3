//! The inventory scenario with `lock-tower`: instances of an axum inventory service share one
//! Redis. `POST /items/{id}/buy` reads the stock, decrements it and writes it back — not
//! atomically, as real handlers often do (check the order, call a payment service, …) — and
//! one `route_layer` makes it safe across every instance, in this process or another.
//!
//! Needs a Redis that every instance shares, named by `REDIS_URL` (never one it merely finds
//! on 6379). `--demo` runs on its own: `REDIS_URL` if set, else a private `redis-server`.
//!
//! ```sh
//! # 300 buyers against a stock of 100 over three instances in this process, then exit:
//! cargo run -p distlock-examples --example axum_inventory -- --demo
//!
//! # Or one instance per process, as deployed (REDIS_URL names the shared Redis):
//! cargo run -p distlock-examples --example axum_inventory -- --port 3001   # terminal 1
//! cargo run -p distlock-examples --example axum_inventory -- --port 3002   # terminal 2
//! curl -X PUT 'http://127.0.0.1:3001/items/7/stock?count=100'
//! curl -i -X POST http://127.0.0.1:3002/items/7/buy      # 200, JSON with the fencing token
//! curl http://127.0.0.1:3001/items/7                     # {"item":7,"left":99}
//! # Hold item 7 for 5 s on one instance; the other answers 409 + Retry-After after its 2 s
//! # wait:
//! curl -X POST 'http://127.0.0.1:3001/items/7/buy?hold=5' & sleep 0.2
//! curl -i -X POST http://127.0.0.1:3002/items/7/buy
//! # Ctrl-C the first curl: the lock is released at once, not when its lease ends.
//! curl -i http://127.0.0.1:3001/ready                    # 200, or 503 when Redis is down
//! # Ctrl-C (or SIGTERM) an instance: it finishes its requests, then releases every lock
//! # its client still holds (`LockClient::shutdown`), not after their leases.
//! # `--instances 3 --port 3001` serves 3001, 3002 and 3003 from one process instead.
//! ```

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Extension, Json, Router};
use clap::Parser;
use distlock_examples::ExampleRedis;
use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use lock_core::{LockClient, LockInfo};
use lock_tower::lock::DistributedLockLayer;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An axum inventory service whose buy route is locked per item across instances.
#[derive(Debug, Parser)]
struct Args {
    /// Instances to serve from this process, on consecutive ports from `--port`, each with
    /// its own lock client (as separate processes would have) [default: 1, or 3 with --demo]
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    instances: Option<u16>,
    /// Port of the first instance on 127.0.0.1; 0 gives each a free port [default: 3001, or
    /// 0 with --demo]
    #[arg(long)]
    port: Option<u16>,
    /// Sell a stock of 100 to 300 concurrent buyers over the instances, report, and exit.
    #[arg(long)]
    demo: bool,
}

#[derive(Clone)]
struct Inventory {
    redis: MultiplexedConnection,
    instance: u16,
}

fn stock_key(id: u64) -> String {
    format!("distlock-example:stock:{id}")
}

/// A failed Redis call: 503 with the error's text.
struct RedisDown(redis::RedisError);

impl From<redis::RedisError> for RedisDown {
    fn from(e: redis::RedisError) -> Self {
        Self(e)
    }
}

impl IntoResponse for RedisDown {
    fn into_response(self) -> Response {
        (StatusCode::SERVICE_UNAVAILABLE, format!("{}\n", self.0)).into_response()
    }
}

#[derive(Deserialize)]
struct BuyParams {
    /// Keep the lock this many seconds longer, to watch other buyers get 409.
    #[serde(default)]
    hold: u64,
}

#[derive(Serialize)]
struct Sale {
    instance: u16,
    item: u64,
    left: i64,
    lock: String,
    fencing_token: u64,
}

/// Read, think, write: correct only because the layer holds `item_<id>` meanwhile.
async fn buy(
    State(inv): State<Inventory>,
    Path(id): Path<u64>,
    Query(params): Query<BuyParams>,
    Extension(lock): Extension<LockInfo>,
) -> Result<Response, RedisDown> {
    let mut redis = inv.redis.clone();
    let key = stock_key(id);
    let stock: Option<i64> = redis.get(&key).await?;
    tokio::time::sleep(Duration::from_secs(params.hold)).await;
    tokio::task::yield_now().await;
    Ok(match stock {
        None => (StatusCode::NOT_FOUND, format!("no item {id}\n")).into_response(),
        Some(left) if left <= 0 => {
            (StatusCode::GONE, format!("item {id} is sold out\n")).into_response()
        }
        Some(left) => {
            redis.set::<_, _, ()>(&key, left - 1).await?;
            Json(Sale {
                instance: inv.instance,
                item: id,
                left: left - 1,
                lock: lock.name().to_string(),
                fencing_token: lock.fencing_token(),
            })
            .into_response()
        }
    })
}

#[derive(Serialize)]
struct Stock {
    item: u64,
    left: i64,
}

async fn show(State(inv): State<Inventory>, Path(id): Path<u64>) -> Result<Response, RedisDown> {
    let left: Option<i64> = inv.redis.clone().get(stock_key(id)).await?;
    Ok(match left {
        Some(left) => Json(Stock { item: id, left }).into_response(),
        None => (StatusCode::NOT_FOUND, format!("no item {id}\n")).into_response(),
    })
}

#[derive(Deserialize)]
struct RestockParams {
    count: Option<i64>,
}

async fn restock(
    State(inv): State<Inventory>,
    Path(id): Path<u64>,
    Query(params): Query<RestockParams>,
) -> Result<Json<Stock>, RedisDown> {
    let count = params.count.unwrap_or(100);
    inv.redis
        .clone()
        .set::<_, _, ()>(stock_key(id), count)
        .await?;
    Ok(Json(Stock {
        item: id,
        left: count,
    }))
}

/// One instance: its own lock client (as a separate process would have) and router.
/// `GET /ready`: a readiness probe that asks Redis (`LockClient::ping`).
async fn ready(State(locks): State<LockClient>) -> StatusCode {
    match locks.ping().await {
        Ok(()) => StatusCode::OK,
        Err(_) => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// One instance's router, and its lock client (to shut down when the instance stops).
async fn instance(url: &str, instance: u16) -> Result<(Router, LockClient), BoxError> {
    let locks = LockClient::new(url)?;
    let redis = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    // `<id:u64>` is the `{id}` of the route axum matched (never `?id=`), read as `Path<u64>`
    // reads it: `/items/07/buy` locks `item_7` too.
    let lock = DistributedLockLayer::builder(locks.clone())
        .key("item_<id:u64>")
        .wait(Duration::from_secs(2))
        .build()?;
    let app = Router::new()
        .route("/items/{id}/buy", post(buy).route_layer(lock))
        .route("/items/{id}", get(show))
        .route("/items/{id}/stock", put(restock))
        .with_state(Inventory { redis, instance })
        .merge(
            Router::new()
                .route("/ready", get(ready))
                .with_state(locks.clone()),
        );
    Ok((app, locks))
}

/// Resolves on Ctrl-C or SIGTERM (what a service manager sends).
async fn shutdown_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = Args::parse();
    // Instances in separate processes must share one Redis: only the self-contained demo
    // may start a private one.
    let redis = if args.demo {
        ExampleRedis::from_env_or_start()?
    } else {
        ExampleRedis::from_env()?
    };
    let url = redis.url();
    let instances = args.instances.unwrap_or(if args.demo { 3 } else { 1 });
    let base = args.port.unwrap_or(if args.demo { 0 } else { 3001 });
    let (stop, stopping) = tokio::sync::watch::channel(());
    let (mut addrs, mut servers, mut clients) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..instances {
        let (app, locks) = instance(url, i + 1).await?;
        let port = if base == 0 { 0 } else { base.saturating_add(i) };
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|e| format!("cannot listen on 127.0.0.1:{port}: {e}"))?;
        addrs.push(listener.local_addr()?);
        let mut stopping = stopping.clone();
        let graceful = async move {
            let _ = stopping.changed().await;
        };
        servers.push(tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(graceful)
                .await
        }));
        clients.push(locks);
    }
    if args.demo {
        return run_demo(url, &addrs).await;
    }
    let shown = distlock_examples::redacted(url);
    println!("inventory on {addrs:?} (Redis {shown}); Ctrl-C to stop");
    shutdown_signal().await;
    // Stop taking requests and let the running ones finish, then give back every lock the
    // clients still hold: the next instance need not wait for a lease to end.
    let _ = stop.send(());
    for server in servers {
        server.await??;
    }
    for locks in clients {
        let released = locks.shutdown().await?;
        println!("shut down: {released} locks released");
    }
    Ok(())
}

/// 300 concurrent purchases of item 7 spread over the instances, against a stock of 100.
async fn run_demo(url: &str, addrs: &[SocketAddr]) -> Result<(), BoxError> {
    let mut redis = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    redis.set::<_, _, ()>(stock_key(7), 100).await?;
    let http = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let buyers: Vec<_> = (0..300)
        .map(|i| {
            let http = http.clone();
            let uri = format!("http://{}/items/7/buy", addrs[i % addrs.len()]);
            tokio::spawn(async move {
                let request = hyper::Request::post(uri).body(Empty::new())?;
                Ok::<_, BoxError>(http.request(request).await?.status())
            })
        })
        .collect();
    let (mut sold, mut sold_out, mut other) = (0, 0, Vec::new());
    for buyer in buyers {
        match buyer.await?? {
            StatusCode::OK => sold += 1,
            StatusCode::GONE => sold_out += 1,
            status => other.push(status.as_u16()),
        }
    }
    let left: i64 = redis.get(stock_key(7)).await?;
    println!("stock 100, 300 buyers over {} instances:", addrs.len());
    println!("  {sold} sold, {sold_out} told it is sold out, other answers {other:?}");
    println!("  stock left: {left}");
    if sold + left == 100 {
        println!("  no oversell: every sale was taken off the stock");
        Ok(())
    } else {
        Err(format!("oversold: {sold} sales, {left} left").into())
    }
}
