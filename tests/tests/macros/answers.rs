//! `LockError` answered directly, with lock-core's `axum` and `tonic` features: a handler
//! returns `Result<_, LockError>`, a gRPC method uses `?` into `tonic::Status`, with the
//! layer's codes and no holder in the answer.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{Request, StatusCode};
use axum::routing::post;
use axum::Router;
use distlock_tests::locks::{builder, client};
use distlock_tests::RedisServer;
use lock_core::{distributed_lock, LockClient, LockError};
use tower::ServiceExt;

#[distributed_lock(key = "seat_<id>", client = locks, wait = "0s")]
async fn reserve(
    State(locks): State<LockClient>,
    Path(id): Path<u64>,
) -> Result<String, LockError> {
    Ok(format!("seat {id}"))
}

#[distributed_lock(key = "seat_<id>", client = locks, wait = "0s")]
async fn reserve_grpc(locks: &LockClient, id: u64) -> Result<u64, tonic::Status> {
    Ok(id)
}

#[tokio::test]
async fn a_busy_lock_answers_409_and_aborted_without_its_holder() {
    let server = RedisServer::start();
    let locks = client(&server.url());
    let app = Router::new()
        .route("/seats/{id}", post(reserve))
        .with_state(locks.clone());
    let holder = builder(&server.url())
        .service_name("billing-svc")
        .holder_host("web-3.internal")
        .build()
        .unwrap();
    let guard = holder
        .lock("seat_4")
        .request_id("req-secret")
        .await
        .unwrap();
    let response = app
        .oneshot(Request::post("/seats/4").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CONFLICT);
    // The wait was 0 s: one more attempt is worth it after the shortest hint, 1 s.
    assert_eq!(response.headers()["retry-after"], "1");
    let body = axum::body::to_bytes(response.into_body(), 1024)
        .await
        .unwrap();
    let body = String::from_utf8(body.to_vec()).unwrap();
    assert_eq!(body, "the resource is locked; retry later");
    let status = reserve_grpc(&locks, 4).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Aborted);
    for secret in ["billing-svc", "web-3.internal", "req-secret"] {
        assert!(!body.contains(secret) && !status.message().contains(secret));
    }
    guard.release().await.unwrap();
    assert_eq!(reserve_grpc(&locks, 4).await.unwrap(), 4);
}
