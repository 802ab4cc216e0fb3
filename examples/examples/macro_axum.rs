//! `#[distributed_lock]` directly on axum handlers: twenty concurrent buyers of an item with
//! ten in stock, and exactly ten sales, even though the stock is read and written without
//! any atomic operation.
//!
//! Its owners run in this one process. Uses `REDIS_URL` if set, else starts a
//! private `redis-server` (stopped at exit); copies of it in other processes exclude each
//! other only through one Redis: give them the same `REDIS_URL`.
//!
//! ```sh
//! cargo run -p distlock-examples --example macro_axum
//! ```

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use distlock_examples::ExampleRedis;
use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use lock_core::{distributed_lock, LockClient, LockError};
use redis::AsyncCommands;

#[derive(Clone)]
struct App {
    locks: LockClient,
    redis: redis::aio::MultiplexedConnection,
}

/// The handlers' error: a busy item answers 409, an unreachable Redis 503.
enum ApiError {
    Lock(LockError),
    Redis(redis::RedisError),
    SoldOut,
}

impl From<LockError> for ApiError {
    fn from(e: LockError) -> Self {
        ApiError::Lock(e)
    }
}

impl From<redis::RedisError> for ApiError {
    fn from(e: redis::RedisError) -> Self {
        ApiError::Redis(e)
    }
}

impl IntoResponse for ApiError {
    /// A lock error answers as lock-core's `axum` answer does (409 busy, 503 unavailable or
    /// lost, …) with a body that never names the holder; the error's own text, which names
    /// the holder's service, host and pid, stays in the logs. A Redis error says no more.
    fn into_response(self) -> Response {
        match self {
            ApiError::Lock(e) => e.into_response(),
            ApiError::Redis(e) => {
                eprintln!("redis failed: {e}");
                (StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response()
            }
            ApiError::SoldOut => (StatusCode::GONE, "sold out").into_response(),
        }
    }
}

/// The extractors' patterns are parameters of the key: `<id>` comes from `Path(id)`.
#[distributed_lock(key = "item_<id>", client = app.locks, wait = "10s")]
async fn buy(State(app): State<App>, Path(id): Path<u64>) -> Result<String, ApiError> {
    let mut redis = app.redis.clone();
    let key = format!("example:stock_{id}");
    let stock: u64 = redis.get(&key).await?;
    if stock == 0 {
        return Err(ApiError::SoldOut);
    }
    tokio::task::yield_now().await; // another request would slip in here without the lock
    let () = redis.set(&key, stock - 1).await?;
    let token = lock_core::current_lock().expect("held").fencing_token();
    Ok(format!("sold, {} left (fencing token {token})", stock - 1))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let redis_server = ExampleRedis::from_env_or_start()?;
    let mut redis = redis::Client::open(redis_server.url())?
        .get_multiplexed_async_connection()
        .await?;
    let () = redis.set("example:stock_7", 10).await?;
    let app = App {
        locks: LockClient::new(redis_server.url())?,
        redis,
    };
    let router = Router::new()
        .route("/items/{id}/buy", post(buy))
        .with_state(app);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });

    let http = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let buyers: Vec<_> = (0..20)
        .map(|_| {
            let request = hyper::Request::post(format!("http://{addr}/items/7/buy"))
                .body(Empty::new())
                .expect("a valid request");
            tokio::spawn(http.request(request))
        })
        .collect();
    let mut sold = 0;
    for buyer in buyers {
        let status = buyer.await??.status();
        if status == StatusCode::OK {
            sold += 1;
        }
        println!("{status}");
    }
    println!("{sold} sold out of 10 in stock");
    Ok(())
}
