//! The idempotency layer while Redis is down: once the client knows the outage, its `503`
//! comes at once, as the lock layer's does, not after a command timeout per request.

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{Request, StatusCode};
use axum::routing::post;
use axum::Router;
use distlock_examples::payments::client;
use distlock_tests::locks::builder;
use distlock_tests::outage::make_outage_known;
use distlock_tests::{RedisServer, TcpProxy};
use futures_util::future::join_all;
use http_body_util::{BodyExt, Full};
use lock_core::LockClient;
use lock_tower::idempotency::IdempotencyLayer;
use tokio::net::TcpListener;
use tokio::time::Instant;

/// Long, so that a request that waits for Redis is told apart from one answered at once.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// An app whose one route answers `201` behind the idempotency layer of `locks`.
async fn app(locks: LockClient) -> SocketAddr {
    let layer = IdempotencyLayer::builder(locks).namespace("t").build();
    let app = Router::new()
        .route("/echo", post(|| async { StatusCode::CREATED }))
        .route_layer(layer);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    addr
}

/// POSTs with the idempotency key `key`: the status, its `Retry-After` and how long it took.
async fn post_key(addr: SocketAddr, key: &str) -> (StatusCode, Option<String>, Duration) {
    let request = Request::builder()
        .method("POST")
        .uri(format!("http://{addr}/echo"))
        .header("idempotency-key", key)
        .body(Full::new(Bytes::from_static(b"x")))
        .unwrap();
    let started = Instant::now();
    let exchange = async {
        let response = client::http().request(request).await.expect("a response");
        let (parts, body) = response.into_parts();
        body.collect().await.expect("a body");
        parts
    };
    let parts = tokio::time::timeout(COMMAND_TIMEOUT * 4, exchange)
        .await
        .expect("an answer within four command timeouts");
    let retry_after = (parts.headers.get("retry-after")).map(|v| v.to_str().unwrap().to_owned());
    (parts.status, retry_after, started.elapsed())
}

/// Once the client knows Redis is down, the idempotency layer answers `503` +
/// `Retry-After` without waiting for Redis: of 10 requests sent together into a black hole,
/// at most one (the client's probe, one a second) waits the command timeout.
/// Control: a client that has not seen the outage waits the command timeout for the same
/// request, so a layer that did not fail fast would fail this test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_outage_is_503_at_once_and_the_control_waits_the_timeout() {
    let server = RedisServer::start();
    // The control's client reaches the same server through a proxy of its own, so that its
    // connection lives on into the black hole (it never saw the outage being learnt).
    let (proxy, control_proxy) = (
        TcpProxy::start(server.addr()),
        TcpProxy::start(server.addr()),
    );
    let client = |proxy: &TcpProxy| {
        let builder = builder(&proxy.url()).command_timeout(COMMAND_TIMEOUT);
        builder.connect_timeout(COMMAND_TIMEOUT).build().unwrap()
    };
    let knows = client(&proxy);
    let (knows_app, fresh_app) = (app(knows.clone()).await, app(client(&control_proxy)).await);
    // Both clients connected, both layers working.
    assert_eq!(post_key(knows_app, "warm-1").await.0, StatusCode::CREATED);
    assert_eq!(post_key(fresh_app, "warm-2").await.0, StatusCode::CREATED);
    make_outage_known(&knows, &proxy).await;
    proxy.refuse(false);
    proxy.blackhole(true);
    control_proxy.blackhole(true);
    let control = tokio::spawn(async move { post_key(fresh_app, "control").await });
    let keys: Vec<String> = (0..10).map(|i| format!("down-{i}")).collect();
    let answers = join_all(keys.iter().map(|key| post_key(knows_app, key))).await;
    for (status, retry_after, _) in &answers {
        assert_eq!(*status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(retry_after.as_deref(), Some("5"));
    }
    let at_once = answers
        .iter()
        .filter(|(_, _, took)| *took < COMMAND_TIMEOUT / 2)
        .count();
    assert!(
        at_once >= 9,
        "answered at once: {at_once} of 10: {answers:?}"
    );
    let (status, _, took) = control.await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        took >= COMMAND_TIMEOUT,
        "the control did not wait for Redis ({took:?}): the test could not tell"
    );
}

/// The `p`-th percentile of sorted `took`.
fn percentile(took: &[Duration], p: usize) -> Duration {
    took[(took.len() * p / 100).min(took.len() - 1)]
}

/// Prints the latency of the layer's `503`s during an outage (killed server, default
/// timeouts, requests one after another, `PACE_MS` apart, 0 by default): for the lab notes,
/// by hand with
/// `cargo test -p distlock-tests --test tower idempotency_outage::measure -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand"]
async fn measure_503_latency_during_an_outage() {
    const REQUESTS: usize = 60;
    let mut server = RedisServer::start();
    let locks = LockClient::builder(server.url()).build().unwrap();
    let addr = app(locks).await;
    assert_eq!(post_key(addr, "warm").await.0, StatusCode::CREATED);
    let pace = std::env::var("PACE_MS").map_or(0, |ms| ms.parse().expect("PACE_MS: ms"));
    server.kill();
    let started = Instant::now();
    let mut took = Vec::with_capacity(REQUESTS);
    for i in 0..REQUESTS {
        let (status, _, t) = post_key(addr, &format!("k{i}")).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        took.push(t);
        tokio::time::sleep(Duration::from_millis(pace)).await;
    }
    took.sort();
    let slow = took
        .iter()
        .filter(|t| **t > Duration::from_millis(100))
        .count();
    println!(
        "idempotency layer 503 during an outage, {REQUESTS} requests {pace} ms apart over \
         {:?}: p50 {:?} p99 {:?} max {:?}, {slow} above 100 ms",
        started.elapsed(),
        percentile(&took, 50),
        percentile(&took, 99),
        took[REQUESTS - 1]
    );
}
