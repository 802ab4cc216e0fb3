//! The layer at the edge: a forced release stops the holder's request at once, requests that
//! matched no route pass untouched, a semaphore answers at once, a dead Redis does not hold
//! responses for the command timeout.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;
use distlock_tests::locks::{self, exists, lock_key, wait_until, GENEROUS};
use distlock_tests::RedisServer;
use lock_tower::lock::DistributedLockLayer;
use lock_tower::semaphore::DistributedSemaphoreLayer;
use redis::AsyncCommands;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::axum_router::{send_with, serve};

/// Records when it is dropped: when the handler's future stopped.
struct DropProbe(Arc<Mutex<Option<Instant>>>);

impl Drop for DropProbe {
    fn drop(&mut self) {
        *self.0.lock().unwrap() = Some(Instant::now());
    }
}

/// Subscribers of the client's revocation channel on `url`.
async fn revocation_listeners(url: &str, client_id: &str) -> i64 {
    let mut conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let channel = format!("distlock:revoke:{{{client_id}}}");
    let (_, n): (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(&mut conn)
        .await
        .unwrap();
    n
}

/// `distlock release --force` on a running request: the holder's client hears it on its
/// revocation channel, the guard reports the loss, and the layer drops the handler and
/// answers 503 — within milliseconds, not at the watchdog's next renewal (10 s). The issue
/// asks for 100 ms; the bound here is 2 s for a loaded CI machine, the measured figure is
/// printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_release_stops_the_holders_handler_at_once() {
    let server = RedisServer::start();
    let url = server.url();
    let locks = locks::client(&url);
    let (entered, stopped) = (Arc::new(Notify::new()), Arc::new(Mutex::new(None)));
    let handler = post({
        let (entered, stopped) = (Arc::clone(&entered), Arc::clone(&stopped));
        move || async move {
            let _probe = DropProbe(stopped);
            entered.notify_one();
            std::future::pending::<&str>().await
        }
    });
    let layer = DistributedLockLayer::new(locks.clone(), "job_<id:u64>").unwrap();
    let addr = serve(
        Router::new()
            .route("/jobs/{id}", handler)
            .route_layer(layer),
    )
    .await;
    let request = tokio::spawn(async move { send_with(addr, "POST", "/jobs/1", &[]).await });
    entered.notified().await;
    wait_until("the holder listens for revocations", GENEROUS, || {
        let (url, id) = (url.clone(), locks.id().to_owned());
        async move { revocation_listeners(&url, &id).await >= 1 }
    })
    .await;
    let operator = locks::client(&url);
    let forced = Instant::now();
    let told = operator.force_release_notified("job_1").await.unwrap();
    assert_eq!(told, Some(1));
    let reply = request.await.unwrap();
    assert_eq!(reply.status, 503, "{reply:?}");
    assert_eq!(
        reply.body,
        "lock `job_<id:u64>` was lost while the request ran\n"
    );
    let stopped_at = stopped.lock().unwrap().expect("the handler was dropped");
    let latency = stopped_at.saturating_duration_since(forced);
    println!("tower edge: force release to handler stopped: {latency:?}");
    assert!(latency < Duration::from_secs(2), "{latency:?}");
}

/// `.layer(…)` on a whole `Router` (instead of `.route_layer`): a path nobody routes goes
/// to the router's 404 without a lock and without an error (one warning per layer); routed
/// paths are locked as before; a matched route without the placeholder stays a 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmatched_paths_reach_the_routers_404_unlocked() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let layer = DistributedLockLayer::builder(locks::client(&server.url()))
        .key("item_<id:u64>")
        .wait(Duration::ZERO)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/items/{id}/buy", post(|| async { "bought" }))
        .route("/shelves/{shelf}", get(|| async { "shelf" }))
        .layer(layer);
    let addr = serve(app).await;
    for path in ["/health", "/wp-login.php", "/items/7"] {
        let reply = send_with(addr, "GET", path, &[]).await;
        assert_eq!(reply.status, 404, "{path}: {reply:?}");
    }
    let keys: Vec<String> = conn.keys("*").await.unwrap();
    assert!(keys.is_empty(), "no lock for unrouted paths: {keys:?}");
    let holder = locks::client(&server.url());
    let guard = holder.lock("item_7").await.unwrap();
    assert_eq!(
        send_with(addr, "POST", "/items/7/buy", &[]).await.status,
        409
    );
    guard.release().await.unwrap();
    assert_eq!(
        send_with(addr, "POST", "/items/7/buy", &[]).await.status,
        200
    );
    // A route that matched but has no `{id}`: the misconfiguration is answered 500.
    let reply = send_with(addr, "GET", "/shelves/3", &[]).await;
    assert_eq!(reply.status, 500, "{reply:?}");
}

/// A semaphore layer without `.wait(…)` answers a request over the limit at once, though
/// its client waits 30 s by default (as tower's concurrency limiters answer at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_semaphore_answers_at_once_by_default() {
    let server = RedisServer::start();
    let client = locks::client(&server.url());
    assert_eq!(client.default_wait(), Some(Duration::from_secs(30)));
    let layer = DistributedSemaphoreLayer::new(client, "export_<header.x-tenant:str>", 1).unwrap();
    let addr = serve(
        Router::new()
            .route("/export", post(|| async { "ok" }))
            .route_layer(layer),
    )
    .await;
    let holder = locks::client(&server.url());
    let permit = holder.semaphore("export_t1", 1).await.unwrap();
    let started = Instant::now();
    let reply = send_with(addr, "POST", "/export", &[("x-tenant", "t1")]).await;
    let waited = started.elapsed();
    assert_eq!(reply.status, 429, "{reply:?}");
    assert!(waited < GENEROUS, "answered after {waited:?}, not at once");
    drop(permit);
}

/// Redis freezes while a request runs: the response does not wait the command timeout
/// (10 s here) for the release; the release finishes (or the lease ends it) later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_does_not_hold_the_response_for_the_command_timeout() {
    let server = RedisServer::start();
    let command_timeout = Duration::from_secs(10);
    let client = locks::builder(&server.url())
        .command_timeout(command_timeout)
        .build()
        .unwrap();
    let (entered, go) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let handler = post({
        let (entered, go) = (Arc::clone(&entered), Arc::clone(&go));
        move || async move {
            entered.notify_one();
            go.notified().await;
            "done"
        }
    });
    let layer = DistributedLockLayer::new(client, "job_<id:u64>").unwrap();
    let addr = serve(
        Router::new()
            .route("/jobs/{id}", handler)
            .route_layer(layer),
    )
    .await;
    let request = tokio::spawn(async move { send_with(addr, "POST", "/jobs/1", &[]).await });
    entered.notified().await;
    server.pause();
    let finished = Instant::now();
    go.notify_one();
    let reply = request.await.unwrap();
    let answered_after = finished.elapsed();
    server.resume();
    assert_eq!(reply.status, 200, "{reply:?}");
    println!("tower edge: response after its handler with Redis frozen: {answered_after:?}");
    assert!(answered_after < command_timeout / 2, "{answered_after:?}");
    // The release was not lost: it reaches Redis once it answers again.
    let conn = server.conn().await;
    wait_until("the release finished in the background", GENEROUS, || {
        let mut conn = conn.clone();
        async move { !exists(&mut conn, &lock_key("job_1")).await }
    })
    .await;
}
