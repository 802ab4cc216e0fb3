//! lock-tower with axum: real `Router`s served on loopback ports, real Redis.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{header, Response, StatusCode};
use axum::routing::{get, post};
use axum::{Extension, Router};
use distlock_tests::locks::{self, exists, lock_key, wait_gone, GENEROUS};
use distlock_tests::{RedisServer, TcpProxy};
use futures_util::future::join_all;
use lock_core::{LockClient, LockInfo, OnLost};
use lock_tower::lock::{DistributedLockLayer, OutagePolicy};
use lock_tower::semaphore::DistributedSemaphoreLayer;
use lock_tower::{KeyError, RejectionKind};
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Notify};
use tokio::time::Instant;

// ---------------------------------------------------------------------------------------------
// Helpers: serving a router, a minimal HTTP/1.1 client.

/// Serves `app` on a free loopback port until the test's runtime ends.
pub(crate) async fn serve(app: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    addr
}

#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: HashMap<String, String>,
    pub(crate) body: String,
}

fn request_text(method: &str, path: &str, headers: &[(&str, &str)]) -> String {
    let headers: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    format!(
        "{method} {path} HTTP/1.1\r\nhost: test\r\n{headers}content-length: 0\r\nconnection: close\r\n\r\n"
    )
}

/// Sends one request on a fresh connection and reads the whole reply.
async fn send(addr: SocketAddr, method: &str, path: &str) -> Reply {
    send_with(addr, method, path, &[]).await
}

/// [`send`] with extra request headers.
pub(crate) async fn send_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Reply {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream
            .write_all(request_text(method, path, headers).as_bytes())
            .await
            .expect("write");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.expect("read");
        parse(&raw)
    };
    tokio::time::timeout(Duration::from_secs(60), exchange)
        .await
        .unwrap_or_else(|_| panic!("{method} {path}: no reply within 60 s"))
}

fn parse(raw: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").expect("a full response head");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// A lock layer on `/items/{id}/buy`, keyed `item_<id>`.
fn item_layer(client: LockClient, wait: Duration) -> DistributedLockLayer {
    DistributedLockLayer::builder(client)
        .route("/items/{id}/buy")
        .key("item_<id:str>")
        .wait(wait)
        .build()
        .expect("valid layer")
}

// ---------------------------------------------------------------------------------------------
// The inventory scenario.

#[derive(Clone)]
struct Shop {
    redis: MultiplexedConnection,
    /// For the unlocked run: makes the first two buyers read the stock before either writes.
    rendezvous: Option<Arc<watch::Sender<usize>>>,
}

/// A deliberately non-atomic read-modify-write of `stock:<id>`.
async fn buy(
    State(shop): State<Shop>,
    Path(id): Path<u64>,
    lock: Option<Extension<LockInfo>>,
) -> (StatusCode, String) {
    let mut redis = shop.redis.clone();
    let key = format!("stock:{id}");
    let stock: i64 = redis.get(&key).await.expect("GET stock");
    if let Some(readers) = &shop.rendezvous {
        readers.send_modify(|n| *n += 1);
        let mut seen = readers.subscribe();
        // Bounded: the unlocked run only needs two readers to meet once.
        let _ = tokio::time::timeout(GENEROUS, seen.wait_for(|n| *n >= 2)).await;
    } else {
        tokio::task::yield_now().await;
    }
    if stock <= 0 {
        return (StatusCode::GONE, "sold out".into());
    }
    let () = redis.set(&key, stock - 1).await.expect("SET stock");
    let token = lock.map_or(0, |Extension(info)| info.fencing_token());
    (StatusCode::OK, format!("bought, token {token}"))
}

fn shop(redis: MultiplexedConnection, rendezvous: Option<Arc<watch::Sender<usize>>>) -> Router {
    Router::new()
        .route("/items/{id}/buy", post(buy))
        .with_state(Shop { redis, rendezvous })
}

/// Sends `n` concurrent purchases of item 7 spread over `addrs`; returns the statuses.
async fn buy_concurrently(addrs: &[SocketAddr], n: usize) -> Vec<u16> {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let addr = addrs[i % addrs.len()];
            tokio::spawn(async move { send(addr, "POST", "/items/7/buy").await.status })
        })
        .collect();
    let mut statuses = Vec::with_capacity(n);
    for task in tasks {
        statuses.push(task.await.expect("request task"));
    }
    statuses
}

/// Three instances with their own clients sell a stock of 100 to 300 buyers: the lock makes
/// the handler's read-modify-write exclusive across processes, so exactly 100 succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_instances_sell_exactly_the_stock() {
    let server = RedisServer::start();
    let mut redis = server.conn().await;
    let () = redis.set("stock:7", 100).await.unwrap();
    let mut addrs = Vec::new();
    for _ in 0..3 {
        let layer = item_layer(locks::client(&server.url()), Duration::from_secs(120));
        let app = shop(server.conn().await, None).route_layer(layer);
        addrs.push(serve(app).await);
    }
    let statuses = buy_concurrently(&addrs, 300).await;
    let ok = statuses.iter().filter(|s| **s == 200).count();
    let gone = statuses.iter().filter(|s| **s == 410).count();
    let stock: i64 = redis.get("stock:7").await.unwrap();
    assert_eq!((ok, gone, stock), (100, 200, 0), "statuses: {statuses:?}");
    wait_gone(&mut redis, &lock_key("item_7"), GENEROUS).await;
}

/// The same handler without the layer loses updates: two buyers read the same stock. The
/// rendezvous makes the race certain, so this cannot flake.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_the_layer_the_same_handler_oversells() {
    let server = RedisServer::start();
    let mut redis = server.conn().await;
    let () = redis.set("stock:7", 100).await.unwrap();
    let readers = Arc::new(watch::Sender::new(0));
    let mut addrs = Vec::new();
    for _ in 0..3 {
        addrs.push(serve(shop(server.conn().await, Some(Arc::clone(&readers)))).await);
    }
    let statuses = buy_concurrently(&addrs, 300).await;
    let ok = statuses.iter().filter(|s| **s == 200).count() as i64;
    let stock: i64 = redis.get("stock:7").await.unwrap();
    assert!(
        ok > 100 - stock,
        "expected lost updates: {ok} sold, stock went from 100 to {stock}"
    );
}

// ---------------------------------------------------------------------------------------------
// Rejections.

async fn ok_handler() -> &'static str {
    "ok"
}

/// A busy lock answers 409 with a body that names the lock's family, never its holder:
/// no service, host, pid or request id in the body or the headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_answer_names_the_family_not_the_holder() {
    let server = RedisServer::start();
    let layer = item_layer(locks::client(&server.url()), Duration::from_millis(200));
    let addr = serve(
        Router::new()
            .route("/items/{id}/buy", post(ok_handler))
            .route_layer(layer),
    )
    .await;
    let holder = locks::builder(&server.url())
        .service_name("billing-svc")
        .holder_host("web-3.internal")
        .build()
        .unwrap();
    let guard = holder
        .lock("item_7")
        .request_id("req-secret-42")
        .await
        .expect("holder locks");
    let reply = send(addr, "POST", "/items/7/buy").await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (409, "lock `item_<id:str>` is busy\n")
    );
    let pid = std::process::id().to_string();
    let everything = format!("{:?}", reply);
    for secret in [
        "billing-svc",
        "web-3.internal",
        "req-secret-42",
        pid.as_str(),
    ] {
        assert!(!everything.contains(secret), "{secret} in {reply:?}");
    }
    guard.release().await.unwrap();
    assert_eq!(send(addr, "POST", "/items/7/buy").await.status, 200);
}

/// `Retry-After` estimates when the lock will be free from the hold times the layer saw:
/// for requests that hold the lock 1 s, 4 s and 10 s (watchdog on, so the lease says
/// ~30 s), a request that finds one busy is told about the hold time, not the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retry_after_follows_the_observed_hold_time() {
    let server = RedisServer::start();
    let client = locks::client(&server.url());
    let checks: Vec<_> = [1u64, 4, 10]
        .into_iter()
        .map(|hold| {
            let client = client.clone();
            tokio::spawn(async move {
                let (entered, mut entries) = mpsc::unbounded_channel();
                let handler = post(move |Path(id): Path<u64>| async move {
                    entered.send(id).expect("test listens");
                    // The request's work: it holds the lock this long.
                    tokio::time::sleep(Duration::from_secs(hold)).await;
                    "done"
                });
                let layer = DistributedLockLayer::builder(client)
                    .key(format!("held{hold}_<id:str>"))
                    .wait(Duration::ZERO)
                    .build()
                    .unwrap();
                let app = Router::new()
                    .route("/items/{id}", handler)
                    .route_layer(layer);
                let addr = serve(app).await;
                // One finished hold: the layer's history.
                assert_eq!(send(addr, "POST", "/items/1").await.status, 200);
                entries.recv().await.expect("entered");
                let running = tokio::spawn(send(addr, "POST", "/items/2"));
                assert_eq!(entries.recv().await, Some(2), "the holder runs");
                let busy = send(addr, "POST", "/items/2").await;
                assert_eq!(busy.status, 409, "{busy:?}");
                let retry: u64 = busy.headers["retry-after"].parse().expect("whole seconds");
                assert_eq!(running.await.unwrap().status, 200);
                (hold, retry)
            })
        })
        .collect();
    for check in checks {
        let (hold, retry) = check.await.expect("check ran");
        // The documented bound: the mean hold (`hold` plus a few ms), less the time held,
        // rounded up; the 2 s margin below covers a loaded machine's scheduling.
        assert!(
            retry <= hold + 1 && retry + 2 >= hold.max(1) && retry >= 1,
            "held {hold} s: retry-after {retry}"
        );
    }
}

/// A missing key parameter answers 400 naming it, and no lock is attempted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_key_parameter_answers_400_without_locking() {
    let server = RedisServer::start();
    let mut redis = server.conn().await;
    let layer =
        DistributedLockLayer::new(locks::client(&server.url()), "sku_<query.sku:str>").unwrap();
    let addr = serve(
        Router::new()
            .route("/buy", post(ok_handler))
            .route_layer(layer),
    )
    .await;
    for path in ["/buy", "/buy?sku=", "/buy?sku=%FF"] {
        let reply = send(addr, "POST", path).await;
        assert_eq!(reply.status, 400, "{path}: {reply:?}");
        assert!(reply.body.contains("`query.sku`"), "{path}: {reply:?}");
    }
    let keys: Vec<String> = redis.keys("*").await.unwrap();
    assert!(keys.is_empty(), "no lock may be attempted: {keys:?}");
    assert_eq!(send(addr, "POST", "/buy?sku=a%20b").await.status, 200);
}

/// With Redis down, the layer fails closed (503) unless fail-open was chosen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_answers_503_or_fails_open() {
    let mut server = RedisServer::start();
    let client = locks::builder(&server.url())
        .command_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let closed = item_layer(client.clone(), Duration::from_millis(500));
    let open = DistributedLockLayer::builder(client)
        .route("/items/{id}/buy")
        .key("item_<id:str>")
        .wait(Duration::from_millis(500))
        .on_outage(OutagePolicy::FailOpen)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/items/{id}/buy", post(ok_handler).route_layer(closed))
        .route(
            "/open/items/{id}/buy",
            post(|lock: Option<Extension<LockInfo>>| async move {
                format!("locked: {}", lock.is_some())
            })
            .route_layer(open),
        );
    let addr = serve(app).await;
    assert_eq!(send(addr, "POST", "/items/7/buy").await.status, 200);
    server.kill();
    let reply = send(addr, "POST", "/items/7/buy").await;
    assert_eq!(reply.status, 503, "{reply:?}");
    assert!(reply.body.contains("unavailable") || reply.body.contains("did not answer"));
    // When to come back: lock-core's outage hint, as `LockError`'s own answer gives.
    assert_eq!(reply.headers["retry-after"], "5", "{reply:?}");
    let reply = send(addr, "POST", "/open/items/7/buy").await;
    assert_eq!((reply.status, reply.body.as_str()), (200, "locked: false"));
}

/// While the client knows Redis is down, the layer answers 503 at once: requests find the
/// outage (a black hole: each waits the command timeout) until the client knows of it (its
/// own acquisitions are refused at once); then of 20 sent together at most one (the client's
/// probe) goes to Redis; the others are answered, 503 with `Retry-After: 5`, before a call to
/// the black hole could have timed out. Redis back, the next probe sees it and requests pass
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_known_down_answers_503_at_once_and_recovers() {
    const TIMEOUT: Duration = Duration::from_secs(5);
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.addr());
    let client = locks::builder(&proxy.url())
        .command_timeout(TIMEOUT)
        .build()
        .unwrap();
    let app = Router::new().route(
        "/items/{id}/buy",
        post(ok_handler).route_layer(item_layer(client.clone(), Duration::ZERO)),
    );
    let addr = serve(app).await;
    assert_eq!(send(addr, "POST", "/items/1/buy").await.status, 200);
    proxy.blackhole(true);
    assert_eq!(send(addr, "POST", "/items/1/buy").await.status, 503);
    let deadline = Instant::now() + GENEROUS * 3;
    loop {
        match client.lock("probe").await {
            Err(lock_core::LockError::Unavailable { .. }) => break,
            Err(e) if e.is_unavailable() && Instant::now() < deadline => {}
            other => panic!("not refused at once within the bound: {other:?}"),
        }
    }
    let paths: Vec<String> = (0..20).map(|i| format!("/items/{i}/buy")).collect();
    let replies = join_all(paths.iter().map(|path| async move {
        let started = Instant::now();
        (send(addr, "POST", path).await, started.elapsed())
    }))
    .await;
    for (reply, _) in &replies {
        assert_eq!(reply.status, 503, "{reply:?}");
        assert_eq!(reply.headers["retry-after"], "5", "{reply:?}");
    }
    let at_once = replies.iter().filter(|(_, took)| *took < TIMEOUT).count();
    assert!(at_once >= 19, "answered at once: {at_once} of 20");
    proxy.blackhole(false);
    let deadline = Instant::now() + GENEROUS;
    while send(addr, "POST", "/items/1/buy").await.status != 200 {
        assert!(Instant::now() < deadline, "no 200 since redis came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Lifetime of the lock.

/// A client that disconnects mid-request drops the response future, which releases the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_disconnect_releases_the_lock_within_a_second() {
    let server = RedisServer::start();
    let mut redis = server.conn().await;
    let entered = Arc::new(Notify::new());
    let signal = Arc::clone(&entered);
    let handler = post(move || async move {
        signal.notify_one();
        std::future::pending::<()>().await;
    });
    let layer = item_layer(locks::client(&server.url()), Duration::ZERO);
    let addr = serve(
        Router::new()
            .route("/items/{id}/buy", handler)
            .route_layer(layer),
    )
    .await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(request_text("POST", "/items/7/buy", &[]).as_bytes())
        .await
        .unwrap();
    tokio::time::timeout(GENEROUS, entered.notified())
        .await
        .expect("the handler runs");
    assert!(exists(&mut redis, &lock_key("item_7")).await);
    drop(stream);
    wait_gone(&mut redis, &lock_key("item_7"), Duration::from_secs(1)).await;
}

/// With an explicit lease and the default on-lost abort, a request outliving its lease is
/// dropped and answered 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_lock_aborts_the_request_with_503() {
    let server = RedisServer::start();
    let layer = DistributedLockLayer::builder(locks::client(&server.url()))
        .route("/items/{id}/buy")
        .key("item_<id:str>")
        .lease(Duration::from_millis(500))
        .build()
        .unwrap();
    // Work that outlives the lease many times over.
    let handler = post(|| async { tokio::time::sleep(Duration::from_secs(30)).await });
    let addr = serve(
        Router::new()
            .route("/items/{id}/buy", handler)
            .route_layer(layer),
    )
    .await;
    let reply = send(addr, "POST", "/items/7/buy").await;
    assert_eq!(reply.status, 503, "{reply:?}");
    assert!(reply.body.contains("lost"), "{reply:?}");
}

/// Locks are per key: a request holding item 1 does not delay item 2 (wait 0 fails fast if
/// it did).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn different_ids_do_not_block_each_other() {
    let server = RedisServer::start();
    let entered = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let (signal, gate) = (Arc::clone(&entered), Arc::clone(&release));
    let handler = post(move |Path(id): Path<u64>| async move {
        if id == 1 {
            signal.notify_one();
            let _ = tokio::time::timeout(GENEROUS, gate.notified()).await;
        }
        format!("item {id}")
    });
    let layer = item_layer(locks::client(&server.url()), Duration::ZERO);
    let addr = serve(
        Router::new()
            .route("/items/{id}/buy", handler)
            .route_layer(layer),
    )
    .await;
    let first = tokio::spawn(send(addr, "POST", "/items/1/buy"));
    tokio::time::timeout(GENEROUS, entered.notified())
        .await
        .expect("item 1 is being bought");
    let second = send(addr, "POST", "/items/2/buy").await;
    assert_eq!((second.status, second.body.as_str()), (200, "item 2"));
    let blocked = send(addr, "POST", "/items/1/buy").await;
    assert_eq!(blocked.status, 409, "item 1 is still held: {blocked:?}");
    release.notify_one();
    assert_eq!(first.await.unwrap().status, 200);
}

/// The handler runs in the request's owner scope: re-locking the layer's lock re-enters it
/// (same fencing token) instead of waiting on itself, and `current_lock()` names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_reenters_the_layer_lock() {
    let server = RedisServer::start();
    let client = locks::client(&server.url());
    let inner_client = client.clone();
    let handler = post(
        move |Path(id): Path<u64>, Extension(info): Extension<LockInfo>| async move {
            let current = lock_core::current_lock().expect("current lock");
            let again = inner_client
                .lock(format!("item_{id}"))
                .wait(Duration::ZERO)
                .await
                .expect("re-enters");
            assert_eq!(again.fencing_token(), info.fencing_token());
            assert_eq!(current, info);
            format!("{}", info.name())
        },
    );
    let addr = serve(
        Router::new()
            .route("/items/{id}/buy", handler)
            .route_layer(item_layer(client, Duration::ZERO)),
    )
    .await;
    let reply = send(addr, "POST", "/items/7/buy").await;
    assert_eq!((reply.status, reply.body.as_str()), (200, "item_7"));
}

/// On a whole `Router`, only the configured routes are locked; others pass through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_router_layer_locks_only_its_routes() {
    let server = RedisServer::start();
    let holder = locks::client(&server.url());
    let _guard = holder.lock("item_7").await.unwrap();
    let app = Router::new()
        .route("/items/{id}/buy", post(ok_handler))
        .route("/health", get(ok_handler))
        .layer(item_layer(locks::client(&server.url()), Duration::ZERO));
    let addr = serve(app).await;
    assert_eq!(send(addr, "GET", "/health").await.status, 200);
    assert_eq!(send(addr, "POST", "/items/7/buy").await.status, 409);
    assert_eq!(send(addr, "GET", "/nothing").await.status, 404);
}

/// With the `axum` feature, a `route_layer` without `.route(…)` takes `<id>` from axum's
/// matched route (it used to look in the query string only: every request got 400), also
/// under `Router::nest` with a parameter in the prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_layer_without_routes_reads_axums_matched_route() {
    let server = RedisServer::start();
    let client = locks::client(&server.url());
    let holder = locks::client(&server.url());
    let name = post(|Extension(info): Extension<LockInfo>| async move { info.name().to_string() });
    let layer = |key: &str| {
        DistributedLockLayer::builder(client.clone())
            .key(key)
            .wait(Duration::ZERO)
            .build()
            .unwrap()
    };
    let shops = Router::new()
        .route("/items/{id}", name.clone())
        .route_layer(layer("shop_<shop:str>:item_<id:str>"));
    let app = Router::new()
        .route("/items/{id}/buy", name)
        .route_layer(layer("item_<id:str>"))
        .nest("/shops/{shop}", shops);
    let addr = serve(app).await;
    let reply = send(addr, "POST", "/items/7/buy").await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (200, "item_7"),
        "{reply:?}"
    );
    let reply = send(addr, "POST", "/shops/3/items/7").await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (200, "shop_3:item_7"),
        "{reply:?}"
    );
    // The name is really locked: a holder of `item_8` makes the request busy.
    let _guard = holder.lock("item_8").await.unwrap();
    assert_eq!(send(addr, "POST", "/items/8/buy").await.status, 409);
}

/// Counts the handlers running for item 7 and the most that ever ran at once.
#[derive(Clone, Default)]
struct InFlight {
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    entered: Arc<AtomicUsize>,
}

impl InFlight {
    /// A handler for `/…/items/{id}/buy` that does 5 ms of work on item 7 while counted.
    fn handler(&self) -> axum::routing::MethodRouter {
        let this = self.clone();
        post(
            move |Path(params): Path<HashMap<String, String>>| async move {
                if params["id"].parse::<u64>() == Ok(7) {
                    this.entered.fetch_add(1, Ordering::SeqCst);
                    let now = this.now.fetch_add(1, Ordering::SeqCst) + 1;
                    this.most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    this.now.fetch_sub(1, Ordering::SeqCst);
                }
                "ok"
            },
        )
    }
}

/// Ways a request for item 7 could try to steer the layer onto another lock name.
const STEERING: [&str; 7] = [
    "/items/7/buy?id=8",
    "/items/7/buy?i%64=8",
    "/items/7/buy?id=8&id=9",
    "/items/%37/buy",
    "/items/07/buy",
    "/items/+7/buy",
    "/items/7/buy?ID=8",
];

/// The lock bypass: with the default features and `.route_layer(…)` without routes, `<id>`
/// used to fall back to the query string, so `POST /items/7/buy?id=8` locked `item_8` and
/// ran beside the holder of item 7. Now no spelling of item 7 runs while it is held (a
/// holder outside the app, each layer setup: axum's route, the layer's own route, a nested
/// router), and concurrent requests for item 7 never overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_request_steers_past_the_item_lock() {
    let server = RedisServer::start();
    let client = locks::client(&server.url());
    let layer = |route: Option<&str>, wait: Duration| {
        let builder = DistributedLockLayer::builder(client.clone());
        let builder = match route {
            Some(route) => builder.route(route),
            None => builder,
        };
        builder
            .key("item_<id>")
            .parse_as::<u64>("id")
            .wait(wait)
            .build()
            .unwrap()
    };
    let flight = InFlight::default();
    let app = |wait: Duration| {
        let nested = Router::new()
            .route("/items/{id}/buy", flight.handler())
            .route_layer(layer(None, wait));
        Router::new()
            .route("/items/{id}/buy", flight.handler())
            .route_layer(layer(None, wait))
            .route(
                "/own/items/{id}/buy",
                flight
                    .handler()
                    .route_layer(layer(Some("/own/items/{id}/buy"), wait)),
            )
            .nest("/shops/{shop}", nested)
    };
    let busy = serve(app(Duration::from_millis(100))).await;
    let holder = locks::client(&server.url());
    let guard = holder.lock("item_7").await.unwrap();
    for prefix in ["", "/own", "/shops/1"] {
        for trick in STEERING {
            let path = format!("{prefix}{trick}");
            let reply = send(busy, "POST", &path).await;
            assert_eq!(
                reply.status, 409,
                "{path} must meet item 7's lock: {reply:?}"
            );
        }
        for unrouted in ["/items/7/buy/", "/ITEMS/7/buy"] {
            let path = format!("{prefix}{unrouted}");
            assert_eq!(send(busy, "POST", &path).await.status, 404, "{path}");
        }
    }
    assert_eq!(
        flight.entered.load(Ordering::SeqCst),
        0,
        "no handler ran for item 7"
    );
    assert_eq!(send(busy, "POST", "/items/8/buy?id=7").await.status, 200);
    guard.release().await.unwrap();

    let patient = serve(app(GENEROUS)).await;
    let requests: Vec<_> = (0..60)
        .map(|i| {
            let path = format!("{}{}", ["", "/own", "/shops/1"][i % 3], STEERING[i % 7]);
            tokio::spawn(async move { (send(patient, "POST", &path).await.status, path) })
        })
        .collect();
    for request in requests {
        let (status, path) = request.await.unwrap();
        assert_eq!(status, 200, "{path}");
    }
    assert_eq!(flight.entered.load(Ordering::SeqCst), 60);
    assert_eq!(
        flight.most.load(Ordering::SeqCst),
        1,
        "two handlers ran on item 7 at once"
    );
}

/// A layer whose template names a path parameter the route does not have cannot fill it
/// from anywhere else: the server's mistake, a generic 500 (no lock attempted, no detail
/// for the client; a parameter the client left out is answered 400, in `edge.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placeholder_the_route_lacks_is_a_generic_500() {
    let server = RedisServer::start();
    let mut redis = server.conn().await;
    let layer = DistributedLockLayer::new(locks::client(&server.url()), "item_<id:str>").unwrap();
    let addr = serve(
        Router::new()
            .route("/items/{sku}/buy", post(ok_handler))
            .route_layer(layer),
    )
    .await;
    let reply = send(addr, "POST", "/items/7/buy?id=7").await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (500, "the lock layer cannot make a lock key on this route\n")
    );
    let keys: Vec<String> = redis.keys("*").await.unwrap();
    assert!(keys.is_empty(), "no lock may be attempted: {keys:?}");
}

/// A key function through a real router: its name (from a header and the route's path
/// parameter) is the one locked, and its own `KeyError` answers 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_function_names_the_lock() {
    let server = RedisServer::start();
    let mut redis = server.conn().await;
    let holder = locks::client(&server.url());
    let layer = DistributedLockLayer::builder(locks::client(&server.url()))
        .route("/tenants/{tenant}/jobs")
        .key_fn(|head| {
            let user = head.header("x-user")?.ok_or(KeyError::missing("x-user"))?;
            let tenant = head.path_param("tenant").expect("the route has {tenant}");
            Ok(format!("jobs_{tenant}:{user}").into())
        })
        .wait(Duration::ZERO)
        .build()
        .unwrap();
    let name = post(|Extension(info): Extension<LockInfo>| async move { info.name().to_string() });
    let addr = serve(
        Router::new()
            .route("/tenants/{tenant}/jobs", name)
            .route_layer(layer),
    )
    .await;
    let alice = [("x-user", "alice")];
    let reply = send_with(addr, "POST", "/tenants/acme/jobs", &alice).await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (200, "jobs_acme:alice"),
        "{reply:?}"
    );
    wait_gone(&mut redis, &lock_key("jobs_acme:alice"), GENEROUS).await;
    let _guard = holder.lock("jobs_acme:bob").await.unwrap();
    let bob = [("x-user", "bob")];
    let reply = send_with(addr, "POST", "/tenants/acme/jobs", &bob).await;
    assert_eq!(reply.status, 409, "{reply:?}");
    let reply = send_with(addr, "POST", "/tenants/acme/jobs", &alice).await;
    assert_eq!(reply.status, 200, "another user is not blocked: {reply:?}");
    let reply = send(addr, "POST", "/tenants/acme/jobs").await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (400, "key parameter `x-user` is missing\n")
    );
}

/// With `OnLost::Continue`, a handler whose lock is deleted externally runs to the end and
/// its own answer goes out; the same deletion aborts an `OnLost::Abort` sibling with 503
/// (same client, so the same renewal round sees both losses).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_lock_with_on_lost_continue_lets_the_handler_answer() {
    let server = RedisServer::start();
    let mut redis = server.conn().await;
    // A 3 s lease: the watchdog checks the holds every second.
    let client = locks::builder(&server.url())
        .lease(Duration::from_secs(3))
        .build()
        .unwrap();
    let (entered_tx, mut entered) = mpsc::unbounded_channel();
    let (go, go_rx) = watch::channel(false);
    let handler = post(move |Path(id): Path<String>| {
        let (entered_tx, mut go_rx) = (entered_tx.clone(), go_rx.clone());
        async move {
            entered_tx.send(id.clone()).unwrap();
            let _ = tokio::time::timeout(GENEROUS, go_rx.wait_for(|go| *go)).await;
            format!("finished {id}")
        }
    });
    let layer = |prefix: &str, on_lost| {
        DistributedLockLayer::builder(client.clone())
            .key(format!("{prefix}_<id:str>"))
            .on_lost(on_lost)
            .build()
            .unwrap()
    };
    let app = Router::new()
        .route(
            "/abort/{id}",
            handler.clone().route_layer(layer("a", OnLost::Abort)),
        )
        .route(
            "/continue/{id}",
            handler.route_layer(layer("c", OnLost::Continue)),
        );
    let addr = serve(app).await;
    let aborted = tokio::spawn(send(addr, "POST", "/abort/1"));
    let continued = tokio::spawn(send(addr, "POST", "/continue/1"));
    for _ in 0..2 {
        let id = tokio::time::timeout(GENEROUS, entered.recv()).await;
        assert!(id.expect("both handlers run").is_some());
    }
    let deleted: u32 = redis
        .del(&[lock_key("a_1"), lock_key("c_1")])
        .await
        .unwrap();
    assert_eq!(deleted, 2);
    let reply = tokio::time::timeout(GENEROUS, aborted)
        .await
        .expect("the abort request ends once the loss is seen")
        .unwrap();
    assert_eq!(reply.status, 503, "{reply:?}");
    assert!(reply.body.contains("lost"), "{reply:?}");
    assert!(
        !continued.is_finished(),
        "continue keeps running after the loss"
    );
    go.send_replace(true);
    let reply = continued.await.unwrap();
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (200, "finished 1"),
        "{reply:?}"
    );
}

/// A custom rejection replaces the busy 409: a 429 with a JSON body, built from the
/// rejection's kind and Retry-After; other answers keep their defaults.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_rejection_replaces_the_busy_answer() {
    let server = RedisServer::start();
    let layer = DistributedLockLayer::builder(locks::client(&server.url()))
        .key("item_<id:str>")
        .wait(Duration::from_millis(200))
        .on_rejection(|rejection| {
            if rejection.kind() != RejectionKind::Busy {
                return rejection.default_response();
            }
            let retry = rejection.retry_after().expect("busy has one").as_secs();
            Response::builder()
                .status(StatusCode::TOO_MANY_REQUESTS)
                .header(header::CONTENT_TYPE, "application/json")
                .body(format!(r#"{{"error":"busy","retry_after":{retry}}}"#))
                .unwrap()
        })
        .build()
        .unwrap();
    let addr = serve(
        Router::new()
            .route("/items/{id}/buy", post(ok_handler))
            .route("/buy", post(ok_handler))
            .route_layer(layer),
    )
    .await;
    let holder = locks::client(&server.url());
    let guard = holder
        .lock("item_7")
        .lease(Duration::from_secs(20))
        .await
        .unwrap();
    let reply = send(addr, "POST", "/items/7/buy").await;
    assert_eq!(reply.status, 429, "{reply:?}");
    assert_eq!(reply.headers["content-type"], "application/json");
    let retry: u64 = (reply.body)
        .strip_prefix(r#"{"error":"busy","retry_after":"#)
        .and_then(|rest| rest.strip_suffix('}'))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("custom body: {reply:?}"));
    assert!((1..=20).contains(&retry), "{reply:?}");
    assert!(!reply.headers.contains_key("retry-after"), "{reply:?}");
    // `/buy` has no `{id}`: the layer's misconfiguration, whose default answer is kept.
    assert_eq!(send(addr, "POST", "/buy").await.status, 500, "default kept");
    guard.release().await.unwrap();
    assert_eq!(send(addr, "POST", "/items/7/buy").await.status, 200);
}

/// One wait rule: a layer without `.wait(…)` waits what its client is configured to wait
/// (here 300 ms), not a default of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layer_without_a_wait_uses_the_clients() {
    let server = RedisServer::start();
    let client = locks::builder(&server.url())
        .wait(Duration::from_millis(300))
        .build()
        .unwrap();
    let layer = DistributedLockLayer::new(client, "item_<id:str>").unwrap();
    let addr = serve(
        Router::new()
            .route("/items/{id}/buy", post(ok_handler))
            .route_layer(layer),
    )
    .await;
    let holder = locks::client(&server.url());
    let guard = holder.lock("item_7").await.unwrap();
    let started = tokio::time::Instant::now();
    let reply = send(addr, "POST", "/items/7/buy").await;
    let waited = started.elapsed();
    assert_eq!(reply.status, 409, "{reply:?}");
    assert!(
        waited >= Duration::from_millis(300) && waited < GENEROUS,
        "waited {waited:?}: the client's 300 ms, not 30 s or 0"
    );
    guard.release().await.unwrap();
}

/// A public route keyed by a client-chosen id cannot grow Redis: 10,000 requests with
/// random ids through the layer leave the key count where it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_ids_through_the_layer_leave_no_key() {
    use distlock_tests::fault::rng::Rng;
    use futures_util::{stream, StreamExt};
    use tower::ServiceExt;

    let server = RedisServer::start();
    let mut redis = server.conn().await;
    let layer = DistributedLockLayer::new(locks::client(&server.url()), "item_<id:str>").unwrap();
    let app = Router::new()
        .route("/items/{id}/buy", post(ok_handler))
        .route_layer(layer);
    let start: u64 = redis::cmd("DBSIZE").query_async(&mut redis).await.unwrap();
    let mut rng = Rng::new(7);
    let ids: Vec<u64> = (0..10_000).map(|_| rng.next_u64()).collect();
    stream::iter(ids)
        .for_each_concurrent(32, |id| {
            let app = app.clone();
            async move {
                let request = axum::http::Request::post(format!("/items/{id}/buy"))
                    .body(axum::body::Body::empty())
                    .unwrap();
                let response = app.oneshot(request).await.unwrap();
                assert_eq!(response.status(), StatusCode::OK);
            }
        })
        .await;
    let end: u64 = redis::cmd("DBSIZE").query_async(&mut redis).await.unwrap();
    assert_eq!(end, start, "keys left by 10,000 random ids");
}

// ---------------------------------------------------------------------------------------------
// The lock family: read/write by method, and the semaphore layer.

/// Counts the handlers inside, and the most seen at once.
#[derive(Default)]
struct Inside {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl Inside {
    async fn stay(&self, hold: Duration) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(hold).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// With `read_write_by_method`, GETs of one item run together, while a POST runs alone:
/// never beside a GET, never beside another POST.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reads_share_and_writes_are_alone_by_method() {
    let server = RedisServer::start();
    let (readers, writers) = (Arc::new(Inside::default()), Arc::new(Inside::default()));
    let beside = Arc::new(AtomicUsize::new(0));
    let layer = DistributedLockLayer::builder(locks::client(&server.url()))
        .key("item_<id:str>")
        .read_write_by_method()
        .wait(Duration::from_secs(30))
        .build()
        .unwrap();
    let app = Router::new()
        .route(
            "/items/{id}",
            get({
                let readers = Arc::clone(&readers);
                move || async move { readers.stay(Duration::from_millis(200)).await }
            })
            .post({
                let (readers, writers, beside) = (
                    Arc::clone(&readers),
                    Arc::clone(&writers),
                    Arc::clone(&beside),
                );
                move || async move {
                    beside.fetch_add(readers.now.load(Ordering::SeqCst), Ordering::SeqCst);
                    writers.stay(Duration::from_millis(50)).await;
                }
            }),
        )
        .route_layer(layer);
    let addr = serve(app).await;
    let requests: Vec<_> = (0..12)
        .map(|i| {
            let method = if i % 4 == 3 { "POST" } else { "GET" };
            tokio::spawn(async move { send(addr, method, "/items/7").await.status })
        })
        .collect();
    for request in requests {
        assert_eq!(request.await.unwrap(), 200);
    }
    assert!(
        readers.most.load(Ordering::SeqCst) > 1,
        "GETs never overlapped"
    );
    assert_eq!(writers.most.load(Ordering::SeqCst), 1, "POSTs overlapped");
    assert_eq!(beside.load(Ordering::SeqCst), 0, "a POST ran beside a GET");
}

/// The semaphore layer: at most 2 exports of one tenant at once under 20 concurrent
/// requests, while another tenant is not held back; once the permits stay taken past the
/// wait, 429 (or 503 when configured) with a Retry-After and a body naming only the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_semaphore_layer_limits_each_key() {
    let server = RedisServer::start();
    let per_tenant: Arc<[Inside; 2]> = Arc::new(Default::default());
    let layer = DistributedSemaphoreLayer::builder(locks::client(&server.url()), 2)
        .key("exports_<header.x-tenant:str>")
        .wait(Duration::from_secs(30))
        .build()
        .unwrap();
    let handler = {
        let per_tenant = Arc::clone(&per_tenant);
        move |headers: axum::http::HeaderMap| async move {
            let tenant = usize::from(headers["x-tenant"] == "b");
            per_tenant[tenant].stay(Duration::from_millis(100)).await;
        }
    };
    let addr = serve(
        Router::new()
            .route("/export", post(handler))
            .route_layer(layer),
    )
    .await;
    let requests: Vec<_> = (0..24)
        .map(|i| {
            let tenant = if i % 6 == 5 { "b" } else { "a" };
            tokio::spawn(async move {
                send_with(addr, "POST", "/export", &[("x-tenant", tenant)])
                    .await
                    .status
            })
        })
        .collect();
    for request in requests {
        assert_eq!(request.await.unwrap(), 200);
    }
    assert_eq!(per_tenant[0].most.load(Ordering::SeqCst), 2);
    assert!(per_tenant[1].most.load(Ordering::SeqCst) >= 1);

    for (full, status) in [(None, 429), (Some(StatusCode::SERVICE_UNAVAILABLE), 503)] {
        let mut builder = DistributedSemaphoreLayer::builder(locks::client(&server.url()), 1)
            .key("reports_<header.x-tenant:str>")
            .wait(Duration::from_millis(200));
        if let Some(full) = full {
            builder = builder.when_full(full);
        }
        let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let handler = {
            let (started, release) = (Arc::clone(&started), Arc::clone(&release));
            move || async move {
                started.notify_one();
                release.notified().await;
            }
        };
        let app = Router::new()
            .route("/report", post(handler))
            .route_layer(builder.build().unwrap());
        let addr = serve(app).await;
        let first = tokio::spawn(async move {
            send_with(addr, "POST", "/report", &[("x-tenant", "a")])
                .await
                .status
        });
        started.notified().await;
        let reply = send_with(addr, "POST", "/report", &[("x-tenant", "a")]).await;
        assert_eq!(reply.status, status, "{reply:?}");
        assert!(reply.headers.contains_key("retry-after"), "{reply:?}");
        assert_eq!(
            reply.body,
            "limit `reports_<header.x-tenant:str>` is reached\n"
        );
        release.notify_one();
        assert_eq!(first.await.unwrap(), 200);
    }
}
