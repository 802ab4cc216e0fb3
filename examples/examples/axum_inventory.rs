//! The inventory scenario with `lock-tower`: three instances of an axum inventory service
//! share one Redis. `POST /items/{id}/buy` reads the stock, decrements it and writes it
//! back — not atomically, as real handlers often do (check the order, call a payment
//! service, …) — and one `route_layer` makes it safe across all instances.
//!
//! Needs a Redis: `REDIS_URL` (default `redis://127.0.0.1:6379`).
//!
//! ```sh
//! # 300 buyers against a stock of 100 over the three instances, then exit:
//! cargo run -p distlock-examples --example axum_inventory -- --demo
//!
//! # Or serve on 127.0.0.1:3001, :3002 and :3003 (BASE_PORT changes the first) and try:
//! cargo run -p distlock-examples --example axum_inventory
//! curl -X PUT 'http://127.0.0.1:3001/items/7/stock?count=100'
//! curl -i -X POST http://127.0.0.1:3002/items/7/buy      # 200, with the fencing token
//! curl http://127.0.0.1:3003/items/7                     # 99 left
//! # Hold item 7 for 5 s on one instance; another answers 409 + Retry-After after its 2 s wait:
//! curl -X POST 'http://127.0.0.1:3001/items/7/buy?hold=5' & sleep 0.2
//! curl -i -X POST http://127.0.0.1:3002/items/7/buy
//! # Ctrl-C the first curl: the lock is released at once, not when its lease ends.
//! ```

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::routing::{get, post, put};
use axum::{Extension, Router};
use lock_core::{LockClient, LockInfo};
use lock_tower::DistributedLockLayer;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Clone)]
struct Inventory {
    redis: MultiplexedConnection,
    instance: usize,
}

fn stock_key(id: &str) -> String {
    format!("distlock-example:stock:{id}")
}

/// The query parameter `name` as a number (this example's axum has no `Query` extractor).
fn query_number<T: std::str::FromStr>(uri: &Uri, name: &str) -> Option<T> {
    uri.query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

/// Read, think, write: correct only because the layer holds `item_<id>` meanwhile.
async fn buy(
    State(inv): State<Inventory>,
    Path(id): Path<String>,
    Extension(lock): Extension<LockInfo>,
    uri: Uri,
) -> (StatusCode, String) {
    let mut redis = inv.redis.clone();
    let key = stock_key(&id);
    let stock: Option<i64> = match redis.get(&key).await {
        Ok(stock) => stock,
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")),
    };
    // `?hold=N` keeps the lock N seconds longer, to watch other buyers get 409.
    let hold = query_number(&uri, "hold").unwrap_or(0);
    tokio::time::sleep(Duration::from_secs(hold)).await;
    tokio::task::yield_now().await;
    match stock {
        None => (StatusCode::NOT_FOUND, format!("no item {id}\n")),
        Some(left) if left <= 0 => (StatusCode::GONE, format!("item {id} is sold out\n")),
        Some(left) => match redis.set::<_, _, ()>(&key, left - 1).await {
            Ok(()) => (
                StatusCode::OK,
                format!(
                    "instance {} sold item {id} ({} left) under lock `{}`, fencing token {}\n",
                    inv.instance,
                    left - 1,
                    lock.name(),
                    lock.fencing_token()
                ),
            ),
            Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")),
        },
    }
}

async fn show(State(inv): State<Inventory>, Path(id): Path<String>) -> (StatusCode, String) {
    let mut redis = inv.redis.clone();
    match redis.get::<_, Option<i64>>(stock_key(&id)).await {
        Ok(Some(left)) => (StatusCode::OK, format!("{left}\n")),
        Ok(None) => (StatusCode::NOT_FOUND, format!("no item {id}\n")),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")),
    }
}

async fn restock(
    State(inv): State<Inventory>,
    Path(id): Path<String>,
    uri: Uri,
) -> (StatusCode, String) {
    let count: i64 = query_number(&uri, "count").unwrap_or(100);
    let mut redis = inv.redis.clone();
    match redis.set::<_, _, ()>(stock_key(&id), count).await {
        Ok(()) => (StatusCode::OK, format!("item {id}: {count} in stock\n")),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")),
    }
}

/// One instance: its own lock client (as a separate process would have) and router.
async fn instance(url: &str, instance: usize) -> Result<Router, BoxError> {
    let locks = LockClient::new(url)?;
    let redis = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    // The layer's route is the buy route's template: `<id>` is its `{id}` parameter.
    let lock = DistributedLockLayer::builder(locks)
        .route("/items/{id}/buy")
        .key("item_<id>")
        .wait(Duration::from_secs(2))
        .build()?;
    Ok(Router::new()
        .route("/items/{id}/buy", post(buy).route_layer(lock))
        .route("/items/{id}", get(show))
        .route("/items/{id}/stock", put(restock))
        .with_state(Inventory { redis, instance }))
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let demo = std::env::args().any(|a| a == "--demo");
    let base: u16 = match std::env::var("BASE_PORT") {
        Ok(port) => port.parse()?,
        Err(_) if demo => 0,
        Err(_) => 3001,
    };
    let mut addrs = Vec::new();
    for i in 0..3u16 {
        let app = instance(&url, usize::from(i) + 1).await?;
        let port = if base == 0 { 0 } else { base + i };
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        addrs.push(listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, app).await });
    }
    if demo {
        return run_demo(&url, &addrs).await;
    }
    println!("inventory instances on {addrs:?} (Redis {url}); Ctrl-C to stop");
    std::future::pending::<()>().await;
    Ok(())
}

/// 300 concurrent purchases of item 7 spread over the instances, against a stock of 100.
async fn run_demo(url: &str, addrs: &[SocketAddr]) -> Result<(), BoxError> {
    let mut redis = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    redis.set::<_, _, ()>(stock_key("7"), 100).await?;
    let buyers: Vec<_> = (0..300)
        .map(|i| tokio::spawn(post_buy(addrs[i % addrs.len()], "/items/7/buy")))
        .collect();
    let (mut sold, mut sold_out, mut other) = (0, 0, Vec::new());
    for buyer in buyers {
        match buyer.await?? {
            200 => sold += 1,
            410 => sold_out += 1,
            status => other.push(status),
        }
    }
    let left: i64 = redis.get(stock_key("7")).await?;
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

/// A minimal HTTP/1.1 POST; returns the status code.
async fn post_buy(addr: SocketAddr, path: &str) -> Result<u16, std::io::Error> {
    let mut stream = TcpStream::connect(addr).await?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).await?;
    let status = String::from_utf8_lossy(&reply)
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok(status)
}
