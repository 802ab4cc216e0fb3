//! lock-tower's `IdempotencyLayer` and lock-core's idempotency protocol: axum servers on
//! loopback ports, payment service processes, real Redis. (gRPC: idempotency_grpc.rs.)

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Request, StatusCode, Uri};
use axum::routing::post;
use axum::Router;
use distlock_examples::payments::client::{self, Answer, Retries};
use distlock_examples::payments::{ledger_key, ChargeRequest, Receipt};
use distlock_tests::fault::holder::HolderProcess;
use distlock_tests::locks::{self, keys_left, lock_key, pttl, wait_gone, wait_until, GENEROUS};
use distlock_tests::RedisServer;
use http_body_util::{BodyExt, Full};
use lock_core::idempotency::{Begin, Fingerprint, IdempotencyError, Outcome};
use lock_core::LockClient;
use lock_tower::idempotency::{IdempotencyLayer, IdempotencyLayerBuilder, REPLAYED_HEADER};
use redis::aio::MultiplexedConnection;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Notify};

// ---------------------------------------------------------------------------------------------
// An echo service: counts its runs and answers the request body (any bytes) with 201, or the
// status `?status=N` asks for; with `x-block` it reports its entry and waits for the gate.

#[derive(Clone)]
struct Echo {
    runs: Arc<AtomicUsize>,
    gate: Arc<Notify>,
    entered: mpsc::UnboundedSender<()>,
}

async fn echo(
    State(echo): State<Echo>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> (StatusCode, HeaderMap, Bytes) {
    echo.runs.fetch_add(1, Ordering::SeqCst);
    if headers.contains_key("x-block") {
        let _ = echo.entered.send(());
        echo.gate.notified().await;
    }
    let status = uri
        .query()
        .and_then(|q| q.strip_prefix("status="))
        .and_then(|s| StatusCode::from_bytes(s.as_bytes()).ok())
        .unwrap_or(StatusCode::CREATED);
    let mut out = HeaderMap::new();
    out.insert("content-type", "application/octet-stream".parse().unwrap());
    out.insert("x-not-kept", "1".parse().unwrap());
    (status, out, body)
}

/// An echo app behind the layer `configure` builds, served on a free port.
struct EchoApp {
    addr: SocketAddr,
    runs: Arc<AtomicUsize>,
    gate: Arc<Notify>,
    entered: mpsc::UnboundedReceiver<()>,
}

impl EchoApp {
    async fn start(
        client: LockClient,
        configure: impl FnOnce(IdempotencyLayerBuilder) -> IdempotencyLayerBuilder,
    ) -> Self {
        let layer = configure(IdempotencyLayer::builder(client).namespace("t")).build();
        let (tx, entered) = mpsc::unbounded_channel();
        let state = Echo {
            runs: Arc::default(),
            gate: Arc::default(),
            entered: tx,
        };
        let (runs, gate) = (Arc::clone(&state.runs), Arc::clone(&state.gate));
        let app = Router::new()
            .route("/echo", post(echo).get(echo))
            .route_layer(layer)
            .with_state(state);
        let addr = serve(app).await;
        Self {
            addr,
            runs,
            gate,
            entered,
        }
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }

    async fn wait_entered(&mut self) {
        tokio::time::timeout(GENEROUS, self.entered.recv())
            .await
            .expect("the handler started")
            .expect("open");
    }
}

async fn serve(app: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    addr
}

#[derive(Debug)]
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Reply {
    fn replayed(&self) -> bool {
        self.headers
            .get(REPLAYED_HEADER)
            .is_some_and(|v| v == "true")
    }
}

/// Sends `method /echo<query>` with `headers` and `body`; `None` when no answer came within
/// `timeout` (the connection is then dropped, cancelling the request).
async fn send_within(
    addr: SocketAddr,
    method: &str,
    query: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> Option<Reply> {
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://{addr}/echo{query}"));
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let request = request
        .body(Full::new(Bytes::copy_from_slice(body)))
        .unwrap();
    let exchange = async {
        let response = client::http().request(request).await.expect("a response");
        let (parts, body) = response.into_parts();
        let body = body.collect().await.expect("a body").to_bytes();
        Reply {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    };
    tokio::time::timeout(timeout, exchange).await.ok()
}

async fn post_key(addr: SocketAddr, key: &str, body: &[u8]) -> Reply {
    send(addr, "POST", "", &[("idempotency-key", key)], body).await
}

async fn send(
    addr: SocketAddr,
    method: &str,
    query: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    send_within(addr, method, query, headers, body, Duration::from_secs(60))
        .await
        .expect("an answer within 60 s")
}

async fn redis_conn(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// The record keys of completed requests.
async fn records(conn: &mut MultiplexedConnection) -> Vec<String> {
    let mut keys = keys_left(conn).await;
    keys.retain(|k| k.starts_with("distlock__idem:"));
    keys
}

// ---------------------------------------------------------------------------------------------
// The HTTP layer.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_request_is_replayed_and_runs_once() {
    let server = RedisServer::start();
    let app = EchoApp::start(locks::client(&server.url()), |b| b).await;
    let first = post_key(app.addr, "k1", b"hello").await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert!(!first.replayed());
    assert_eq!(first.headers["x-not-kept"], "1");
    for _ in 0..3 {
        let again = post_key(app.addr, "k1", b"hello").await;
        assert_eq!(again.status, StatusCode::CREATED);
        assert!(again.replayed(), "{again:?}");
        assert_eq!(again.body, first.body);
        assert_eq!(again.headers["content-type"], "application/octet-stream");
        // Only the headers the layer keeps are stored.
        assert!(!again.headers.contains_key("x-not-kept"));
    }
    assert_eq!(app.runs(), 1);
    // Other methods and requests without a key pass through.
    send(app.addr, "GET", "", &[("idempotency-key", "k1")], b"").await;
    post_key_less(app.addr).await;
    post_key_less(app.addr).await;
    assert_eq!(app.runs(), 4);
}

async fn post_key_less(addr: SocketAddr) -> Reply {
    send(addr, "POST", "", &[], b"x").await
}

/// Redis down: 503 with the lock layer's `Retry-After: 5`, and the handler does not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_is_503_with_retry_after() {
    let mut server = RedisServer::start();
    let app = EchoApp::start(locks::client(&server.url()), |layer| layer).await;
    server.kill();
    let reply = post_key(app.addr, "k-down", b"x").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{reply:?}");
    assert_eq!(reply.headers["retry-after"], "5", "{reply:?}");
    assert_eq!(app.runs(), 0);
}

/// A duplicate while the first runs is told to come back later; nothing in the answer says
/// who holds the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_duplicate_is_409_with_retry_after() {
    let server = RedisServer::start();
    let client = locks::builder(&server.url())
        .service_name("secret-service")
        .build()
        .unwrap();
    let mut app = EchoApp::start(client, |b| b).await;
    let addr = app.addr;
    let first = tokio::spawn(async move {
        send(
            addr,
            "POST",
            "",
            &[("idempotency-key", "k"), ("x-block", "1")],
            b"a",
        )
        .await
    });
    app.wait_entered().await;
    let duplicate = post_key(addr, "k", b"a").await;
    assert_eq!(duplicate.status, StatusCode::CONFLICT, "{duplicate:?}");
    let after: u64 = duplicate.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(after >= 1, "{after}");
    let text = String::from_utf8_lossy(&duplicate.body).to_string();
    for secret in [
        "secret-service",
        &std::process::id().to_string(),
        "127.0.0.1",
        "redis",
    ] {
        assert!(!text.contains(secret), "{text:?} reveals {secret}");
    }
    app.gate.notify_one();
    assert_eq!(first.await.unwrap().status, StatusCode::CREATED);
    assert!(post_key(addr, "k", b"a").await.replayed());
    assert_eq!(app.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_key_with_another_request_is_422() {
    let server = RedisServer::start();
    let app = EchoApp::start(locks::client(&server.url()), |b| b).await;
    assert_eq!(
        post_key(app.addr, "k", b"a").await.status,
        StatusCode::CREATED
    );
    assert_eq!(
        post_key(app.addr, "k", b"b").await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    let other_path = send(app.addr, "POST", "?x=1", &[("idempotency-key", "k")], b"a").await;
    assert_eq!(other_path.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(app.runs(), 1);
    // A fingerprint of the body alone: the query no longer counts.
    let app = EchoApp::start(locks::client(&server.url()), |b| {
        b.namespace("body-only")
            .fingerprint(|_, body| Fingerprint::of(body))
    })
    .await;
    assert_eq!(
        post_key(app.addr, "k", b"a").await.status,
        StatusCode::CREATED
    );
    let replay = send(app.addr, "POST", "?x=1", &[("idempotency-key", "k")], b"a").await;
    assert!(replay.replayed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_are_independent() {
    let server = RedisServer::start();
    let app = EchoApp::start(locks::client(&server.url()), |b| {
        b.caller(|req| Some(req.headers.get("x-tenant")?.to_str().ok()?.to_owned()))
    })
    .await;
    for tenant in ["a", "b", "a:b", "a%3Ab"] {
        let headers = [("idempotency-key", "k"), ("x-tenant", tenant)];
        let reply = send(app.addr, "POST", "", &headers, tenant.as_bytes()).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{tenant}");
        assert!(!reply.replayed(), "{tenant}");
    }
    assert_eq!(app.runs(), 4);
    let headers = [("idempotency-key", "k"), ("x-tenant", "a")];
    assert!(send(app.addr, "POST", "", &headers, b"a").await.replayed());
    // No caller: refused, not run in a shared space.
    assert_eq!(
        post_key(app.addr, "k", b"a").await.status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(app.runs(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_required_and_validated_with_400() {
    let server = RedisServer::start();
    let app = EchoApp::start(locks::client(&server.url()), |b| {
        b.require_key().max_key_len(8)
    })
    .await;
    let cases: [(&[(&str, &str)], &str); 5] = [
        (&[], "the `idempotency-key` header is required\n"),
        (
            &[("idempotency-key", "")],
            "the `idempotency-key` header is empty\n",
        ),
        (
            &[("idempotency-key", "123456789")],
            "the `idempotency-key` header is longer than 8 characters\n",
        ),
        (
            &[("idempotency-key", "a b")],
            "the `idempotency-key` header may only hold visible ASCII characters\n",
        ),
        (
            &[("idempotency-key", "a"), ("idempotency-key", "b")],
            "the `idempotency-key` header is repeated\n",
        ),
    ];
    for (headers, text) in cases {
        let reply = send(app.addr, "POST", "", headers, b"x").await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{headers:?}");
        assert_eq!(String::from_utf8_lossy(&reply.body), text);
    }
    // GET is not one of the default methods (POST, PATCH).
    assert_eq!(
        send(app.addr, "GET", "", &[], b"").await.status,
        StatusCode::CREATED
    );
    assert_eq!(app.runs(), 1);
    // The draft's quoted form is the same key.
    assert!(!post_key(app.addr, "\"q\"", b"x").await.replayed());
    assert!(post_key(app.addr, "q", b"x").await.replayed());
}

/// Server errors, "try again" answers and cancelled requests leave the key free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_and_cancelled_requests_store_nothing() {
    let server = RedisServer::start();
    let mut conn = redis_conn(&server.url()).await;
    let mut app = EchoApp::start(locks::client(&server.url()), |b| b).await;
    let key = [("idempotency-key", "k")];
    for status in ["500", "503", "503", "429", "409"] {
        let reply = send(app.addr, "POST", &format!("?status={status}"), &key, b"x").await;
        assert_eq!(reply.status.as_str(), status);
        assert!(!reply.replayed());
    }
    assert_eq!(app.runs(), 5);
    assert_eq!(records(&mut conn).await, Vec::<String>::new());
    // A request dropped mid-handler (the client timed out): released, nothing stored.
    let blocked = [("idempotency-key", "k"), ("x-block", "1")];
    let addr = app.addr;
    let gone = tokio::spawn(async move {
        send_within(addr, "POST", "", &blocked, b"x", Duration::from_millis(200)).await
    });
    app.wait_entered().await;
    assert!(gone.await.unwrap().is_none(), "the request was cancelled");
    wait_gone(&mut conn, &lock_key("t:k"), GENEROUS).await;
    assert_eq!(records(&mut conn).await, Vec::<String>::new());
    let retry = post_key(app.addr, "k", b"x").await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert!(!retry.replayed());
    assert_eq!(app.runs(), 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_bodies_empty_at_and_above_the_limit_and_binary() {
    let server = RedisServer::start();
    let app = EchoApp::start(locks::client(&server.url()), |b| b.max_response_body(16)).await;
    let at_limit: Vec<u8> = (0..16).map(|i| [0x00, 0xff, b'\r', b'\n'][i % 4]).collect();
    let above: Vec<u8> = (0..17).map(|i| (i * 37) as u8).collect();
    for (key, body) in [
        ("empty", &b""[..]),
        ("at", &at_limit),
        ("binary", b"\0\x80\xfe"),
    ] {
        let first = post_key(app.addr, key, body).await;
        let again = post_key(app.addr, key, body).await;
        assert_eq!(
            (first.status, again.status),
            (StatusCode::CREATED, StatusCode::CREATED)
        );
        assert!(again.replayed(), "{key}");
        assert_eq!(&first.body[..], body, "{key}");
        assert_eq!(&again.body[..], body, "{key}");
    }
    // Above the limit: the client gets all of it; a duplicate gets the documented 409
    // without Retry-After, and nothing runs again.
    let first = post_key(app.addr, "above", &above).await;
    assert_eq!(
        (first.status, &first.body[..]),
        (StatusCode::CREATED, &above[..])
    );
    let again = post_key(app.addr, "above", &above).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert!(again.replayed());
    assert!(!again.headers.contains_key("retry-after"));
    assert_eq!(app.runs(), 4);
}

/// Nothing outlives the retention: after the requests, only their records are left, each
/// with a TTL of at most the retention; after it, nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_left_after_retention() {
    let server = RedisServer::start();
    let mut conn = redis_conn(&server.url()).await;
    let retention = Duration::from_secs(2);
    let app = EchoApp::start(locks::client(&server.url()), |b| b.retention(retention)).await;
    for i in 0..5 {
        post_key(app.addr, &format!("k{i}"), b"x").await;
        post_key(app.addr, &format!("k{i}"), b"x").await;
        send(
            app.addr,
            "POST",
            "?status=500",
            &[("idempotency-key", "failed")],
            b"x",
        )
        .await;
    }
    let left = keys_left(&mut conn).await;
    assert_eq!(left.len(), 5, "{left:?}");
    for key in &left {
        assert!(key.starts_with("distlock__idem:{"), "{key}");
        let ttl = pttl(&mut conn, key).await;
        assert!(ttl > 0 && ttl <= 2000, "{key}: {ttl}");
    }
    let bound = GENEROUS;
    wait_until("every record expired", bound, || {
        let mut conn = conn.clone();
        async move { keys_left(&mut conn).await.is_empty() }
    })
    .await;
    // After the retention the key runs again.
    assert!(!post_key(app.addr, "k0", b"x").await.replayed());
    assert_eq!(app.runs(), 11);
}

/// A handler slower than the lease keeps its key: the watchdog renews it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_handler_keeps_its_key_through_the_watchdog() {
    let server = RedisServer::start();
    let mut conn = redis_conn(&server.url()).await;
    let client = locks::builder(&server.url())
        .lease(Duration::from_millis(1500))
        .build()
        .unwrap();
    let mut app = EchoApp::start(client, |b| b).await;
    let addr = app.addr;
    let first = tokio::spawn(async move {
        send(
            addr,
            "POST",
            "",
            &[("idempotency-key", "slow"), ("x-block", "1")],
            b"a",
        )
        .await
    });
    app.wait_entered().await;
    // Five renewals seen (each raises the TTL again by a third of the lease): well past
    // one lease.
    let key = lock_key("t:slow");
    let (mut renewals, mut lowest) = (0, i64::MAX);
    let deadline = tokio::time::Instant::now() + GENEROUS;
    while renewals < 5 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{renewals} renewals seen"
        );
        let ttl = pttl(&mut conn, &key).await;
        assert!(ttl > 0, "the key is held");
        if ttl > lowest.saturating_add(200) {
            renewals += 1;
            lowest = ttl;
        }
        lowest = lowest.min(ttl);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        post_key(addr, "slow", b"a").await.status,
        StatusCode::CONFLICT
    );
    app.gate.notify_one();
    assert_eq!(first.await.unwrap().status, StatusCode::CREATED);
    assert!(post_key(addr, "slow", b"a").await.replayed());
    assert_eq!(app.runs(), 1);
}

/// A key lost while its handler runs (here Redis lost the lock; the watchdog's next renewal
/// finds it gone): the handler is dropped, its client answered 503, nothing stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_lost_mid_request_aborts_the_handler_and_stores_nothing() {
    let server = RedisServer::start();
    let mut conn = redis_conn(&server.url()).await;
    let client = locks::builder(&server.url())
        .lease(Duration::from_millis(1500))
        .build()
        .unwrap();
    let mut app = EchoApp::start(client, |b| b).await;
    let addr = app.addr;
    let first = tokio::spawn(async move {
        send(
            addr,
            "POST",
            "",
            &[("idempotency-key", "lost"), ("x-block", "1")],
            b"a",
        )
        .await
    });
    app.wait_entered().await;
    let _: () = redis::cmd("DEL")
        .arg(lock_key("t:lost"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let aborted = first.await.unwrap();
    assert_eq!(
        aborted.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{aborted:?}"
    );
    assert_eq!(records(&mut conn).await, Vec::<String>::new());
    let retry = post_key(addr, "lost", b"a").await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert!(!retry.replayed());
    assert_eq!(app.runs(), 2);
}

// ---------------------------------------------------------------------------------------------
// lock-core's protocol and API.

/// The fencing of the store: a hold that lost its key (here: its lease ended, as under a
/// pause) cannot store over the request that took the key after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_completion_is_not_stored_over_the_newer_holder() {
    let server = RedisServer::start();
    let mut conn = redis_conn(&server.url()).await;
    let (old, new) = (locks::client(&server.url()), locks::client(&server.url()));
    let fp = Fingerprint::of("req");
    let Begin::Run(late) = old.idempotency("k").begin(&fp).await.unwrap() else {
        panic!("the key was free")
    };
    // The lease ends (what expiry does, without waiting for it).
    let _: () = redis::cmd("DEL")
        .arg(lock_key("k"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let Begin::Run(newer) = new.idempotency("k").begin(&fp).await.unwrap() else {
        panic!("the key was free again")
    };
    assert!(newer.guard().fencing_token() > late.guard().fencing_token());
    newer.complete(b"newer").await.unwrap();
    let error = late.complete(b"late").await.unwrap_err();
    assert!(matches!(error, IdempotencyError::Lost { .. }), "{error}");
    match old.idempotency("k").begin(&fp).await.unwrap() {
        Begin::Replay(stored) => assert_eq!(stored.payload(), b"newer"),
        Begin::Run(_) => panic!("the newer result was stored"),
    }
    // Negative control: a hold taken over while the key is still locked cannot store either.
    let Begin::Run(a) = old.idempotency("k2").begin(&fp).await.unwrap() else {
        panic!("free")
    };
    let _: () = redis::cmd("DEL")
        .arg(lock_key("k2"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let Begin::Run(b) = new.idempotency("k2").begin(&fp).await.unwrap() else {
        panic!("free")
    };
    assert!(matches!(
        a.complete(b"a").await,
        Err(IdempotencyError::Lost { .. })
    ));
    b.complete(b"b").await.unwrap();
    assert_eq!(records(&mut conn).await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_core_api_runs_once_and_replays() {
    let server = RedisServer::start();
    let mut conn = redis_conn(&server.url()).await;
    let client = locks::client(&server.url());
    let runs = Arc::new(AtomicUsize::new(0));
    let job = |value: u64| {
        let runs = Arc::clone(&runs);
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, IdempotencyError>(vec![value, 1 << 60])
        }
    };
    let first = client.idempotent("job-1", "fp", job(7)).await.unwrap();
    assert_eq!(first, Outcome::Ran(vec![7, 1 << 60]));
    let again = client.idempotent("job-1", "fp", job(8)).await.unwrap();
    assert_eq!(again, Outcome::Replayed(vec![7, 1 << 60]));
    let other = client
        .idempotent("job-1", "other", job(9))
        .await
        .unwrap_err();
    assert!(other.is_mismatch(), "{other}");
    assert_eq!(
        other.to_string(),
        "idempotency key `job-1` was used for another request"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // A failed run stores nothing: the next one runs.
    let failed = client
        .idempotent("job-2", "fp", async {
            Err::<u64, _>(IdempotencyError::Lost { key: "x".into() })
        })
        .await;
    assert!(failed.is_err());
    assert_eq!(
        client
            .idempotent("job-2", "fp", async { Ok::<_, IdempotencyError>(2_u64) })
            .await
            .unwrap(),
        Outcome::Ran(2)
    );
    // In flight elsewhere: InFlight, nothing run.
    let held = client.lock("job-3").await.unwrap();
    let busy = client.idempotent("job-3", "fp", job(3)).await.unwrap_err();
    assert!(busy.is_in_flight(), "{busy}");
    drop(held);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // Each record has its TTL, the retention.
    for key in records(&mut conn).await {
        let ttl = pttl(&mut conn, &key).await;
        assert!(ttl > 23 * 3600 * 1000, "{key}: {ttl}");
    }
}

// ---------------------------------------------------------------------------------------------
// Payment service processes.

/// A payment service instance in its own process; `lease` for its locks.
async fn instance(url: &str, lease: Duration) -> (HolderProcess, SocketAddr) {
    let args = vec![url.to_owned(), lease.as_millis().to_string()];
    let mut process = HolderProcess::spawn(env!("CARGO_BIN_EXE_payments"), &args);
    let line = process.expect("LISTENING", GENEROUS).await;
    let addr = line
        .split("addr=")
        .nth(1)
        .expect("addr")
        .parse()
        .expect("an address");
    (process, addr)
}

fn charge(account: &str) -> ChargeRequest {
    ChargeRequest {
        account: account.to_owned(),
        cents: 1999,
    }
}

async fn ledger(conn: &mut MultiplexedConnection, account: &str) -> usize {
    redis::cmd("LLEN")
        .arg(ledger_key(account))
        .query_async(conn)
        .await
        .unwrap()
}

/// 3 processes, 200 concurrent duplicates each, then duplicates after completion, then
/// retrying clients whose first attempt times out: one charge per key, and every answer
/// is the stored response or 409 (none a 5xx).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_charge_once_per_key() {
    let server = RedisServer::start();
    let url = server.url();
    let mut conn = redis_conn(&url).await;
    let mut processes = Vec::new();
    let mut addrs = Vec::new();
    for _ in 0..3 {
        let (process, addr) = instance(&url, Duration::from_secs(5)).await;
        processes.push(process);
        addrs.push(addr);
    }
    let http = client::http();
    let request = charge("acct-1");
    // The first phase: 600 at once (the handler takes 300 ms, so many meet it in flight).
    let duplicates: Vec<_> = (0..600)
        .map(|i| {
            let (http, addr, request) = (http.clone(), addrs[i % 3], request.clone());
            tokio::spawn(async move {
                client::attempt(&http, addr, "c", "pay-1", &request, Some(300), GENEROUS * 6).await
            })
        })
        .collect();
    let (mut created, mut replayed, mut conflicts) = (0, 0, 0);
    let mut receipts = Vec::new();
    for duplicate in duplicates {
        match duplicate.await.unwrap() {
            Answer::Response {
                status,
                replayed: r,
                body,
                ..
            } if status == StatusCode::CREATED => {
                if r {
                    replayed += 1
                } else {
                    created += 1
                }
                receipts.push(serde_json::from_slice::<Receipt>(&body).unwrap());
            }
            Answer::Response {
                status: StatusCode::CONFLICT,
                retry_after,
                ..
            } => {
                assert!(retry_after.is_some());
                conflicts += 1;
            }
            other => panic!("neither the stored response nor 409: {other:?}"),
        }
    }
    assert_eq!(created, 1, "one request ran");
    assert!(receipts.windows(2).all(|w| w[0] == w[1]), "one receipt");
    // After completion: every duplicate gets the stored response.
    for i in 0..30 {
        match client::attempt(&http, addrs[i % 3], "c", "pay-1", &request, None, GENEROUS).await {
            Answer::Response {
                status,
                replayed: true,
                ..
            } if status == StatusCode::CREATED => {
                replayed += 1;
            }
            other => panic!("not a replay: {other:?}"),
        }
    }
    // Clients that time out on their first attempt and retry.
    // Generous per attempt (a loaded machine must not time out every retry), yet the first
    // attempt, slowed down by 3 s on the server, always times out.
    let retries = Retries {
        timeout: Duration::from_secs(1),
        attempts: 60,
        first_delay_ms: Some(3000),
    };
    let retrying: Vec<_> = (0..20)
        .map(|_| {
            let (http, addrs, request) = (http.clone(), addrs.clone(), charge("acct-2"));
            tokio::spawn(async move {
                client::charge(&http, &addrs, "c", "pay-2", &request, retries).await
            })
        })
        .collect();
    let mut timeouts = 0;
    for client in retrying {
        let (receipt, seen) = client.await.unwrap();
        assert!(receipt.is_some(), "paid in the end: {seen:?}");
        timeouts += seen.iter().filter(|a| **a == Answer::TimedOut).count();
        for answer in &seen {
            if let Answer::Response { status, .. } = answer {
                assert!(!status.is_server_error(), "{seen:?}");
            }
        }
    }
    assert!(timeouts >= 1, "some first attempts timed out");
    assert_eq!(ledger(&mut conn, "acct-1").await, 1);
    assert_eq!(ledger(&mut conn, "acct-2").await, 1);
    println!(
        "600 concurrent: {created} ran, {replayed} replayed, {conflicts} 409; \
         20 retrying clients: {timeouts} timeouts; charges 1 + 1"
    );
}

/// A handler process killed mid-request: the key is free once its lease ends, and the
/// retry runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_handler_frees_its_key_after_the_lease() {
    let server = RedisServer::start();
    let url = server.url();
    let mut conn = redis_conn(&url).await;
    let (mut victim, victim_addr) = instance(&url, Duration::from_millis(1500)).await;
    let (_other, addr) = instance(&url, Duration::from_millis(1500)).await;
    let http = client::http();
    let request = charge("acct-k");
    let (h, r) = (http.clone(), request.clone());
    let lost = tokio::spawn(async move {
        client::attempt(&h, victim_addr, "c", "kill-1", &r, Some(60_000), GENEROUS).await
    });
    victim.expect("CHARGING", GENEROUS).await;
    victim.kill().await;
    assert!(matches!(
        lost.await.unwrap(),
        Answer::Failed | Answer::TimedOut
    ));
    wait_gone(&mut conn, &lock_key("payments:c:kill-1"), GENEROUS).await;
    let retry = client::attempt(&http, addr, "c", "kill-1", &request, None, GENEROUS).await;
    assert!(
        matches!(
            retry,
            Answer::Response {
                status: StatusCode::CREATED,
                replayed: false,
                ..
            }
        ),
        "{retry:?}"
    );
    let again = client::attempt(&http, addr, "c", "kill-1", &request, None, GENEROUS).await;
    assert!(
        matches!(again, Answer::Response { replayed: true, .. }),
        "{again:?}"
    );
    assert_eq!(ledger(&mut conn, "acct-k").await, 1);
}

/// A handler process paused past its lease: the retry takes the key and completes; the
/// paused one's late completion is neither charged nor stored over the retry's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_handler_does_not_store_over_the_retry() {
    let server = RedisServer::start();
    let url = server.url();
    let mut conn = redis_conn(&url).await;
    let (paused, paused_addr) = instance(&url, Duration::from_millis(1500)).await;
    let mut paused = paused;
    let (_other, addr) = instance(&url, Duration::from_millis(1500)).await;
    let http = client::http();
    let request = charge("acct-p");
    let (h, r) = (http.clone(), request.clone());
    let late = tokio::spawn(async move {
        client::attempt(
            &h,
            paused_addr,
            "c",
            "pause-1",
            &r,
            Some(1000),
            GENEROUS * 3,
        )
        .await
    });
    paused.expect("CHARGING", GENEROUS).await;
    paused.stop();
    wait_gone(&mut conn, &lock_key("payments:c:pause-1"), GENEROUS).await;
    let retry = client::attempt(&http, addr, "c", "pause-1", &request, None, GENEROUS).await;
    let Answer::Response {
        status: StatusCode::CREATED,
        replayed: false,
        body,
        ..
    } = retry
    else {
        panic!("the retry ran: {retry:?}")
    };
    let receipt: Receipt = serde_json::from_slice(&body).unwrap();
    paused.cont();
    let late = late.await.unwrap();
    match &late {
        Answer::Response { status, .. } => assert!(!status.is_success(), "{late:?}"),
        other => panic!("no answer from the resumed process: {other:?}"),
    }
    assert_eq!(ledger(&mut conn, "acct-p").await, 1);
    let replay =
        client::attempt(&http, paused_addr, "c", "pause-1", &request, None, GENEROUS).await;
    let Answer::Response {
        replayed: true,
        body,
        ..
    } = replay
    else {
        panic!("a replay: {replay:?}")
    };
    assert_eq!(serde_json::from_slice::<Receipt>(&body).unwrap(), receipt);
}

// ---------------------------------------------------------------------------------------------
// Cost.

/// Commands sent since the last reset (`INFO commandstats`; scripts' inner calls included
/// under their own names), then reset.
async fn commands(conn: &mut MultiplexedConnection) -> std::collections::BTreeMap<String, u64> {
    let (mut calls, _) = distlock_tests::locks::command_calls(conn).await;
    calls.retain(|command, _| !command.starts_with("config") && command != "info");
    distlock_tests::locks::reset_stats(conn).await;
    calls
}

/// What the layer adds per request, in Redis round trips (the BENCHMARKS.md row): a first
/// request reads the record, takes the key, reads the record again and stores-and-releases
/// (4); a replay reads the record (1); a duplicate in flight reads the record and tries the
/// lock (2: a busy try that was not queued leaves nothing to clean up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trips_per_request_first_and_replay() {
    let server = RedisServer::start();
    let mut conn = redis_conn(&server.url()).await;
    let mut app = EchoApp::start(locks::client(&server.url()), |b| b).await;
    // Loads the library, so that the counted requests make no load.
    post_key(app.addr, "warm-up", b"x").await;
    commands(&mut conn).await;
    post_key(app.addr, "k", b"x").await;
    let mut first = commands(&mut conn).await;
    assert!(post_key(app.addr, "k", b"x").await.replayed());
    let replay = commands(&mut conn).await;
    let trips = |calls: &mut std::collections::BTreeMap<String, u64>| {
        calls.remove("get").unwrap_or(0) + calls.remove("fcall").unwrap_or(0)
    };
    // A duplicate in flight: the record read and the busy acquisition, nothing else (a try
    // is never queued). Counted the second time, as the first request was.
    let addr = app.addr;
    let mut busy = Default::default();
    for key in ["busy-warm-up", "busy"] {
        let headers = [("idempotency-key", key), ("x-block", "1")];
        let blocked = tokio::spawn(async move { send(addr, "POST", "", &headers, b"x").await });
        app.wait_entered().await;
        commands(&mut conn).await;
        assert_eq!(post_key(addr, key, b"x").await.status, StatusCode::CONFLICT);
        busy = commands(&mut conn).await;
        app.gate.notify_one();
        blocked.await.unwrap();
    }
    println!("first: {first:?}; replay: {replay:?}; in flight: {busy:?}");
    assert_eq!(trips(&mut first), 4, "{first:?}");
    assert_eq!(replay, [("get".to_owned(), 1)].into_iter().collect());
    assert_eq!(trips(&mut busy), 2, "{busy:?}");
}

// ---------------------------------------------------------------------------------------------
// Topologies.

/// On a Cluster the record shares the lock's slot (the completing script would fail with
/// CROSSSLOT otherwise), whatever the bytes of the key; under Redlock the protocol is
/// refused with a typed error, before anything is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_share_the_lock_slot_on_a_cluster_and_redlock_is_refused() {
    let cluster = distlock_tests::RedisCluster::start(3, 0);
    let client = LockClient::cluster(cluster.seed_urls())
        .command_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    for key in ["plain", "a{b}c", "{", "}{", "%7B", "ünï", "x:y:z"] {
        let ran = client
            .idempotent(key, "fp", async { Ok::<_, IdempotencyError>(key.len()) })
            .await
            .unwrap();
        assert_eq!(ran, Outcome::Ran(key.len()), "{key}");
        let replayed = client
            .idempotent(key, "fp", async { Ok::<_, IdempotencyError>(0) })
            .await
            .unwrap();
        assert_eq!(replayed, Outcome::Replayed(key.len()), "{key}");
    }
    let servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let redlock = LockClient::redlock(servers.iter().map(RedisServer::url))
        .build()
        .unwrap();
    let refused = redlock
        .idempotent("k", "fp", async { Ok::<_, IdempotencyError>(1) })
        .await
        .unwrap_err();
    assert!(
        matches!(refused, IdempotencyError::Redlock { .. }),
        "{refused}"
    );
    for server in &servers {
        let mut conn = redis_conn(&server.url()).await;
        assert!(keys_left(&mut conn).await.is_empty());
    }
}
