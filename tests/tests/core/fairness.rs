//! The fair queue: waiters get the lock in arrival order, straight from the releasing
//! holder; waiters that leave or die never keep it.

use std::time::Duration;

use distlock_tests::locks::{
    client, exists, lock_key, queue_key, queue_waiter, queued, wait_until, GENEROUS,
};
use distlock_tests::RedisServer;
use lock_core::{LockError, LockGuard};
use redis::aio::MultiplexedConnection;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Five waiters queued one after another acquire in that order.
#[tokio::test]
async fn waiters_acquire_in_arrival_order() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let holder = client(&server.url());
    let guard = holder.lock("fifo").await.unwrap();
    let (order_tx, mut order_rx) = mpsc::unbounded_channel();
    for i in 0..5usize {
        let (locks, order) = (client(&server.url()), order_tx.clone());
        tokio::spawn(async move {
            let g = locks
                .lock("fifo")
                .wait(Duration::from_secs(60))
                .await
                .unwrap();
            order.send(i).unwrap();
            g.release().await.unwrap();
        });
        wait_until("the waiter queued", GENEROUS, || {
            let mut conn = conn.clone();
            async move { queued(&mut conn, &queue_key("fifo")).await == i + 1 }
        })
        .await;
    }
    guard.release().await.unwrap();
    let mut order = Vec::new();
    for _ in 0..5 {
        order.push(
            tokio::time::timeout(GENEROUS, order_rx.recv())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    assert_eq!(order, [0, 1, 2, 3, 4]);
    assert_eq!(queued(&mut conn, &queue_key("fifo")).await, 0);
}

/// A waiter that gives up leaves the queue; one whose place expired is skipped.
#[tokio::test]
async fn departed_and_dead_waiters_are_skipped() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = client(&server.url());
    let guard = locks.lock("skip").await.unwrap();
    let queue = &queue_key("skip");

    let err = locks
        .lock("skip")
        .wait(Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(err.is_wait_timeout(), "{err}");
    assert!(err.remaining_ttl().is_some());
    assert_eq!(
        queued(&mut conn, queue).await,
        0,
        "a timed-out waiter stayed queued"
    );

    // A dead waiter: queued first, with a liveness deadline in the past.
    queue_waiter(&mut conn, queue, "30000|dead:1", 0, 1).await;
    let waiter = tokio::spawn({
        let locks = locks.clone();
        async move { locks.lock("skip").wait(Duration::from_secs(60)).await }
    });
    wait_until("the live waiter queued", GENEROUS, || {
        let mut conn = conn.clone();
        async move { queued(&mut conn, queue).await == 2 }
    })
    .await;
    hand_over(guard, waiter, &mut conn, queue).await;
    assert!(!exists(&mut conn, &lock_key("skip")).await);
}

/// A waiter that queued long ago (past the floor every queueing lasts) is still served while
/// its refreshed deadline lives: only a fresh arrival spares the hand-off the deadline's read,
/// an old one is never taken for dead without it.
#[tokio::test]
async fn a_waiter_queued_long_ago_is_served_while_its_deadline_lives() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = client(&server.url());
    let guard = locks.lock("old").await.unwrap();
    let queue = &queue_key("old");
    // Its client listens for its grants: alive.
    let _listening = listen_for_grants(&server, "old", "old").await;
    let (secs, _): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    // Arrived at the clock's start, refreshed to live another minute.
    queue_waiter(&mut conn, queue, "30000|old:1", 0, secs * 1000 + 60_000).await;
    guard.release().await.unwrap();
    let holds: Option<u32> = redis::cmd("HGET")
        .arg(lock_key("old"))
        .arg("old:1")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(holds, Some(1), "the live waiter was passed over");
    assert_eq!(queued(&mut conn, queue).await, 0);
}

/// A waiter whose client no longer listens for its grants (its process died, its client
/// was dropped) is skipped at the hand-off, however fresh its deadline: the name goes to the
/// next waiter at once. (The test above is its control: the same waiter, listening, is
/// served.)
#[tokio::test]
async fn a_waiter_whose_client_is_gone_is_skipped_at_once() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = client(&server.url());
    let guard = locks.lock("gone").await.unwrap();
    let queue = &queue_key("gone");
    let (secs, _): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    queue_waiter(&mut conn, queue, "30000|gone:1", 0, secs * 1000 + 60_000).await;
    let next = client(&server.url());
    let waiting =
        tokio::spawn(async move { next.lock("gone").wait(Duration::from_secs(60)).await });
    wait_until("the live waiter queued", GENEROUS, || {
        let mut conn = conn.clone();
        async move { queued(&mut conn, &queue_key("gone")).await == 2 }
    })
    .await;
    guard.release().await.unwrap();
    // Read at once: a grant to the gone waiter would hold the name for its claim.
    let holds: Option<u32> = redis::cmd("HGET")
        .arg(lock_key("gone"))
        .arg("gone:1")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(holds, None, "the gone waiter was granted");
    let live = tokio::time::timeout(GENEROUS, waiting)
        .await
        .expect("the live waiter is granted")
        .unwrap()
        .expect("granted");
    live.release().await.unwrap();
}

/// A waiter of library version 1 listens on the grants channel of its version: it would take
/// a claim for its whole lease and not extend it. A release of this version skips it (it
/// re-queues at its next attempt, or takes the lock free), never handing it a claim.
#[tokio::test]
async fn a_waiter_of_the_previous_version_is_never_handed_a_claim() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = client(&server.url());
    let guard = locks.lock("v1").await.unwrap();
    let queue = &queue_key("v1");
    let mut v1 = server.client().get_async_pubsub().await.unwrap();
    v1.subscribe(format!("distlock__grant:{{{}}}:v1", lock_key("v1")))
        .await
        .unwrap();
    let (secs, _): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    queue_waiter(&mut conn, queue, "30000|v1:1", 0, secs * 1000 + 60_000).await;
    guard.release().await.unwrap();
    let holds: Option<u32> = redis::cmd("HGET")
        .arg(lock_key("v1"))
        .arg("v1:1")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(holds, None, "a version 1 waiter was handed a claim");
    assert!(!exists(&mut conn, &lock_key("v1")).await);
}

/// Subscribes, as client `client_id` would, to its grants channel of `name`.
async fn listen_for_grants(
    server: &RedisServer,
    name: &str,
    client_id: &str,
) -> redis::aio::PubSub {
    let mut pubsub = server.client().get_async_pubsub().await.unwrap();
    let channel = format!("distlock__claim:{{{}}}:{client_id}", lock_key(name));
    pubsub.subscribe(channel).await.unwrap();
    pubsub
}

/// A grant whose message never arrives is found by the waiter's next attempt.
#[tokio::test]
async fn missed_grant_is_found_by_retry() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let (holder, waiter) = (client(&server.url()), client(&server.url()));
    let guard = holder.lock("grant").await.unwrap();
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.lock("grant").wait(Duration::from_secs(60)).await }
    });
    wait_until("the waiter queued", GENEROUS, || {
        let mut conn = conn.clone();
        async move { queued(&mut conn, &queue_key("grant")).await == 1 }
    })
    .await;
    server.pause();
    // While Redis is frozen, nothing to do; on resume kill the waiter's pub/sub first.
    server.resume();
    let _: () = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut conn)
        .await
        .unwrap();
    guard.release().await.unwrap();
    let got = tokio::time::timeout(GENEROUS, waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(got.is_held());
    got.release().await.unwrap();
}

/// A waiter's periodic retry keeps its place in the queue and moves its liveness deadline on
/// (one `ZADD LT` of both entries): its arrival score stays, its deadline entry's score
/// (`LIVE_BASE − deadline`) drops.
#[tokio::test]
async fn a_waiting_retry_keeps_its_place_and_extends_its_deadline() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = client(&server.url());
    let guard = locks.lock("refresh").await.unwrap();
    let waiter = tokio::spawn({
        let locks = locks.clone();
        async move { locks.lock("refresh").wait(Duration::from_secs(60)).await }
    });
    let queue = queue_key("refresh");
    let entries = |mut conn: redis::aio::MultiplexedConnection| {
        let queue = queue.clone();
        async move {
            let scored: Vec<(String, u64)> = redis::cmd("ZRANGE")
                .arg(&queue)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query_async(&mut conn)
                .await
                .unwrap();
            scored
        }
    };
    wait_until("the waiter queued", GENEROUS, || {
        let mut conn = conn.clone();
        let queue = queue.clone();
        async move { queued(&mut conn, &queue).await == 1 }
    })
    .await;
    let first = entries(conn.clone()).await;
    assert_eq!(first.len(), 2, "{first:?}: an arrival and a deadline");
    assert_eq!(first[1].0, format!("~{}", first[0].0), "{first:?}");
    // The waiter retries once it has subscribed, then every 2 s while it waits.
    wait_until("the waiter's retry moved its deadline on", GENEROUS, || {
        let (conn, first) = (conn.clone(), first.clone());
        let entries = &entries;
        async move {
            let now = entries(conn).await;
            now.len() == 2 && now[1].1 < first[1].1
        }
    })
    .await;
    let now = entries(conn.clone()).await;
    assert_eq!(now[0], first[0], "the retry moved the waiter in the queue");
    hand_over(guard, waiter, &mut conn, &queue).await;
}

/// Releases `guard`, which hands the lock to the one `waiter` left in `queue`, then releases
/// the waiter's hold.
async fn hand_over(
    guard: LockGuard,
    waiter: JoinHandle<Result<LockGuard, LockError>>,
    conn: &mut MultiplexedConnection,
    queue: &str,
) {
    guard.release().await.unwrap();
    let next = tokio::time::timeout(GENEROUS, waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(next.is_held());
    assert_eq!(queued(conn, queue).await, 0);
    next.release().await.unwrap();
}
