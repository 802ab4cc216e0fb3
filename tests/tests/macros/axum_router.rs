//! An axum `Router` whose handlers carry `#[distributed_lock]` directly.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use distlock_tests::locks::{client, GENEROUS};
use distlock_tests::RedisServer;
use lock_core::{distributed_lock, LockClient, LockError};
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use tower::ServiceExt;

#[derive(Clone)]
struct App {
    locks: LockClient,
    conn: MultiplexedConnection,
    region: String,
}

/// Lock failures answer as lock-core's `axum` answer (409 busy, 503 Redis down); other
/// failures 500.
#[derive(Debug)]
enum ApiError {
    Lock(LockError),
    Redis(redis::RedisError),
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
                tracing::warn!(error = %e, "redis failed");
                (StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response()
            }
        }
    }
}

/// A non-atomic read-modify-write of the stock counter: exact only under the lock.
#[distributed_lock(key = "item_<id>", client = app.locks, wait = "60s")]
async fn buy(State(app): State<App>, Path(id): Path<u64>) -> Result<String, ApiError> {
    let mut conn = app.conn.clone();
    let key = format!("sold_{id}");
    let sold: u64 = conn.get::<_, Option<u64>>(&key).await?.unwrap_or(0);
    tokio::task::yield_now().await;
    let () = conn.set(&key, sold + 1).await?;
    Ok(format!("sold {}", sold + 1))
}

/// The key also takes a field of the state, through the `State(app)` pattern.
#[distributed_lock(
    key = "<app.region>/shop_<shop>:item_<item>",
    client = app.locks,
    wait = "0s"
)]
async fn peek(
    Path((shop, item)): Path<(u32, u32)>,
    State(app): State<App>,
) -> Result<String, ApiError> {
    let lock = lock_core::current_lock().expect("held");
    Ok(format!("{} token {}", lock.name(), lock.fencing_token()))
}

fn router(app: App) -> Router {
    Router::new()
        .route("/items/{id}/buy", post(buy))
        .route("/shops/{shop}/items/{item}", get(peek))
        .with_state(app)
}

async fn call(router: &Router, method: &str, uri: &str) -> (StatusCode, String) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .body(Body::empty())
        .unwrap();
    let response = tokio::time::timeout(GENEROUS * 3, router.clone().oneshot(request))
        .await
        .expect("answered in bounded time")
        .expect("infallible");
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

/// Concurrent requests for one item are serialized: the non-atomic counter ends exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn annotated_handler_serializes_requests() {
    const REQUESTS: u64 = 60;
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let app = App {
        locks: client(&server.url()),
        conn: conn.clone(),
        region: "eu".into(),
    };
    let router = router(app);
    let tasks: Vec<_> = (0..REQUESTS)
        .map(|_| {
            let router = router.clone();
            tokio::spawn(async move { call(&router, "POST", "/items/9/buy").await })
        })
        .collect();
    for task in tasks {
        let (status, body) = task.await.expect("task");
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let sold: u64 = conn.get("sold_9").await.unwrap();
    assert_eq!(sold, REQUESTS, "lost updates: handlers overlapped");
}

/// Path tuple patterns and a state field make the key (the field's `/` encoded); a busy
/// lock answers through the handler's error type.
#[tokio::test]
async fn annotated_handler_reports_a_busy_lock() {
    const NAME: &str = "eu%2Fwest/shop_4:item_2";
    let server = RedisServer::start();
    let conn = server.conn().await;
    let locks = client(&server.url());
    let router = router(App {
        locks: locks.clone(),
        conn,
        region: "eu/west".into(),
    });
    let (status, body) = call(&router, "GET", "/shops/4/items/2").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.starts_with(&format!("{NAME} token ")), "{body}");

    let holder = client(&server.url());
    let guard = holder.lock(NAME).await.expect("holder");
    let (status, body) = call(&router, "GET", "/shops/4/items/2").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    // The answer never names the holder (its pid, host, service).
    assert!(!body.contains(&std::process::id().to_string()), "{body}");
    assert!(!body.contains(holder.id()), "{body}");
    guard.release().await.expect("release");
}

/// `map_err` into a type the crate cannot implement `From<LockError>` for.
fn status_of(error: LockError) -> StatusCode {
    if error.is_wait_timeout() {
        StatusCode::CONFLICT
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    }
}

#[distributed_lock(key = "ticket_<id>", client = app.locks, wait = "0s", map_err = status_of)]
async fn take_ticket(State(app): State<App>, Path(id): Path<u64>) -> Result<String, StatusCode> {
    let _ = &app;
    Ok(format!("ticket {id}"))
}

#[distributed_lock(
    key = "ticket_<id>",
    client = locks,
    wait = "0s",
    map_err = |e| tonic::Status::aborted(format!("busy: {}", e.is_wait_timeout()))
)]
async fn take_ticket_grpc(locks: &LockClient, id: u64) -> Result<u64, tonic::Status> {
    Ok(id)
}

/// `map_err` end to end: a busy lock answers the handler's `StatusCode` (axum) and a
/// `tonic::Status` (gRPC method body), both types the orphan rule keeps from `From`.
#[tokio::test]
async fn map_err_answers_in_the_handlers_error_type() {
    let server = RedisServer::start();
    let locks = client(&server.url());
    let app = App {
        locks: locks.clone(),
        conn: server.conn().await,
        region: "eu".into(),
    };
    let router = Router::new()
        .route("/tickets/{id}", post(take_ticket))
        .with_state(app);
    assert_eq!(
        call(&router, "POST", "/tickets/3").await,
        (StatusCode::OK, "ticket 3".to_owned())
    );
    assert_eq!(take_ticket_grpc(&locks, 3).await.unwrap(), 3);
    let holder = client(&server.url());
    let guard = holder.lock("ticket_3").await.expect("holder");
    assert_eq!(
        call(&router, "POST", "/tickets/3").await.0,
        StatusCode::CONFLICT
    );
    let status = take_ticket_grpc(&locks, 3).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Aborted);
    assert_eq!(status.message(), "busy: true");
    guard.release().await.expect("release");
}
