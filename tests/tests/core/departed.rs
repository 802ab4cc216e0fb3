//! Waits whose client went away leave nothing that blocks the name: a runtime that ended,
//! a client dropped with its waits, and a client shut down while it waits. In each, the
//! release that follows goes straight to the next live waiter — no grant (and so no claim)
//! to the departed one.

use std::time::Duration;

use distlock_tests::locks::{client, lock_key, queue_key, queued, wait_until, GENEROUS};
use distlock_tests::RedisServer;
use lock_core::{LockClient, LockError, LockGuard};
use redis::aio::MultiplexedConnection;
use tokio::task::JoinHandle;

/// Waits until `n` waiters are queued on the lock `name`.
async fn wait_queued(conn: &MultiplexedConnection, name: &str, n: usize) {
    wait_until("the waiters queued", GENEROUS, || {
        let mut conn = conn.clone();
        let queue = queue_key(name);
        async move { queued(&mut conn, &queue).await == n }
    })
    .await;
}

/// A live waiter of `name`, queued behind the departed one.
async fn live_waiter(
    server: &RedisServer,
    conn: &MultiplexedConnection,
    name: &str,
    queued_before: usize,
) -> (LockClient, JoinHandle<Result<LockGuard, LockError>>) {
    let live = client(&server.url());
    let waiting = tokio::spawn({
        let (live, name) = (live.clone(), name.to_owned());
        async move { live.lock(name).wait(Duration::from_secs(60)).await }
    });
    wait_queued(conn, name, queued_before + 1).await;
    (live, waiting)
}

/// Releases `held` and checks, before anyone could act on a claim, that the lock went to
/// the live client and to no other; then that the live waiter has it.
async fn release_to(
    conn: &mut MultiplexedConnection,
    held: LockGuard,
    name: &str,
    live: &LockClient,
    waiting: JoinHandle<Result<LockGuard, LockError>>,
) {
    held.release().await.unwrap();
    let fields: Vec<String> = redis::cmd("HKEYS")
        .arg(lock_key(name))
        .query_async(conn)
        .await
        .unwrap();
    let owners: Vec<&String> = fields
        .iter()
        .filter(|f| !f.starts_with("distlock:"))
        .collect();
    assert!(
        owners.len() == 1 && owners[0].starts_with(live.id()),
        "handed to {owners:?}, not to the live waiter {}",
        live.id()
    );
    let guard = tokio::time::timeout(GENEROUS, waiting)
        .await
        .expect("the live waiter is granted")
        .unwrap()
        .expect("granted");
    guard.release().await.unwrap();
}

/// A wait on a runtime that ended (a process exiting, a test's runtime dropped): its tasks
/// and connections are gone, so its queue entry is not heard and is skipped.
#[tokio::test]
async fn a_wait_whose_runtime_ended_is_skipped() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let holder = client(&server.url());
    let held = holder.lock("rt").await.unwrap();
    let url = server.url();
    let (ended_tx, ended_rx) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.spawn(async move {
            let departed = client(&url);
            departed.lock("rt").wait(Duration::from_secs(60)).await
        });
        // Runs the wait until told to end, then drops the runtime with the wait in it.
        runtime
            .block_on(async { tokio::task::spawn_blocking(move || ended_rx.recv()).await })
            .ok();
    });
    wait_queued(&conn, "rt", 1).await;
    ended_tx.send(()).unwrap();
    thread.join().unwrap();
    let (live, waiting) = live_waiter(&server, &conn, "rt", 1).await;
    release_to(&mut conn, held, "rt", &live, waiting).await;
}

/// A client dropped while its waits are cancelled (their tasks aborted): each wait leaves
/// its queue, and the client's connections close.
#[tokio::test]
async fn a_dropped_client_with_aborted_waits_is_skipped() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let holder = client(&server.url());
    let held = holder.lock("drop").await.unwrap();
    let departed = client(&server.url());
    let waits: Vec<_> = (0..3)
        .map(|_| {
            let departed = departed.clone();
            tokio::spawn(async move { departed.lock("drop").wait(Duration::from_secs(60)).await })
        })
        .collect();
    wait_queued(&conn, "drop", 3).await;
    for wait in &waits {
        wait.abort();
    }
    drop(departed);
    // Each aborted wait left its queue from the background.
    wait_queued(&conn, "drop", 0).await;
    let (live, waiting) = live_waiter(&server, &conn, "drop", 0).await;
    release_to(&mut conn, held, "drop", &live, waiting).await;
}

/// `shutdown()` takes the client's waits out of their queues before it returns, and the
/// waits end with `ShutDown` — the call a service's SIGTERM handling makes.
#[tokio::test]
async fn shutdown_leaves_every_queue_before_it_returns() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let holder = client(&server.url());
    let held = holder.lock("stop").await.unwrap();
    let stopping = client(&server.url());
    let waits: Vec<_> = (0..3)
        .map(|_| {
            let stopping = stopping.clone();
            tokio::spawn(async move { stopping.lock("stop").wait(Duration::from_secs(60)).await })
        })
        .collect();
    wait_queued(&conn, "stop", 3).await;
    stopping.shutdown().await.unwrap();
    assert_eq!(
        queued(&mut conn, &queue_key("stop")).await,
        0,
        "shutdown returned with waits still queued"
    );
    for wait in waits {
        let ended = tokio::time::timeout(GENEROUS, wait).await.unwrap().unwrap();
        assert!(
            matches!(ended, Err(LockError::ShutDown { .. })),
            "{ended:?}"
        );
    }
    let (live, waiting) = live_waiter(&server, &conn, "stop", 0).await;
    release_to(&mut conn, held, "stop", &live, waiting).await;
}
