//! Waiters wake on the release message, and by the holder's TTL when a message is missed.

use std::time::Duration;

use distlock_tests::locks::{
    client, function_calls, queued, reset_stats, rw_queue_key, sem_queue_key, wait_until, GENEROUS,
};
use distlock_tests::metrics::counter;
use distlock_tests::RedisServer;
use tokio::time::Instant;

/// A waiter blocked on a 30 s-lease lock is woken by the release's message (counted as
/// such; its own retries come every 2 s and the lease would take 30 s), not by a timer. Its
/// subscription is gone afterwards. (Also pins the grant message's token
/// format: Lua once printed a clock-seeded token as `1.7954357565964e+15`, the grant was
/// dropped as unparseable and every hand-off waited for the 2 s retry.)
#[tokio::test]
async fn waiter_wakes_on_release() {
    distlock_tests::metrics::install();
    let server = RedisServer::start();
    let conn = server.conn().await;
    let (holder, waiter) = (client(&server.url()), client(&server.url()));
    let guard = holder.lock("wake").await.expect("holder acquires");
    reset_stats(&mut conn.clone()).await;
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move {
            let request = waiter.lock("wake").metrics_label("wakeup_release");
            let guard = request.wait(Duration::from_secs(60)).await;
            (guard, Instant::now())
        }
    });
    subscribed_and_retried(&conn, &waiter, 1).await;
    let released_at = Instant::now();
    guard.release().await.expect("release");
    let (acquired, acquired_at) = waiting.await.unwrap();
    let acquired = acquired.expect("waiter acquires");
    let latency = acquired_at - released_at;
    println!("wakeup: acquired {latency:?} after the release");
    assert_eq!(
        woken_by_message("wakeup_release"),
        1,
        "not woken by the message"
    );
    assert!(latency < GENEROUS, "woke after {latency:?}");
    assert_eq!(
        waiter.waited_channels(),
        0,
        "the waiter left its channel subscribed"
    );
    // The UNSUBSCRIBE goes out after the waiter left: wait for Redis to see it.
    wait_until("Redis dropped the subscription", GENEROUS, || {
        let mut conn = conn.clone();
        async move { subscriptions(&mut conn).await == [1, 1] }
    })
    .await;
    acquired.release().await.unwrap();
}

/// A writer and a semaphore's waiter in another process are handed the hold by their grant
/// message too (grants go to the waiter's own client channel, for every kind): one wake-up
/// by message each, none by a timer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_is_handed_over_to_another_process_by_message() {
    distlock_tests::metrics::install();
    let server = RedisServer::start();
    let conn = server.conn().await;
    let (holder, waiter) = (client(&server.url()), client(&server.url()));
    let request = |locks: &lock_core::LockClient, kind: &str| match kind {
        "write" => locks.write_lock("handed_write"),
        _ => locks.semaphore("handed_sem", 1),
    };
    for kind in ["write", "semaphore"] {
        let label = format!("wakeup_{kind}");
        let guard = request(&holder, kind).await.expect("holder acquires");
        reset_stats(&mut conn.clone()).await;
        let waiting = tokio::spawn({
            let wait = request(&waiter, kind).metrics_label(label.clone());
            async move { wait.wait(Duration::from_secs(60)).await }
        });
        subscribed_and_retried(&conn, &waiter, 1).await;
        guard.release().await.expect("release");
        let acquired = waiting.await.unwrap().expect("waiter acquires");
        assert_eq!(
            woken_by_message(&label),
            1,
            "{kind}: not woken by its grant message"
        );
        acquired.release().await.unwrap();
    }
}

/// One hand-off grants every queued waiter that fits, each told by its own message: two
/// readers queued behind a writer's hold (the head the release popped goes the prelude's
/// way: it is no writer), and a semaphore's waiter of 2 permits queued behind one of 1 (it
/// fits once the first holds, so the hand-off reads past the head).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_hand_off_grants_every_waiter_that_fits() {
    distlock_tests::metrics::install();
    let server = RedisServer::start();
    let conn = server.conn().await;
    let (holder, waiter) = (client(&server.url()), client(&server.url()));
    for kind in ["read", "semaphore"] {
        let (name, queue) = match kind {
            "read" => ("fits_rw", rw_queue_key("fits_rw")),
            _ => ("fits_sem", sem_queue_key("fits_sem")),
        };
        let guard = match kind {
            "read" => holder.write_lock(name),
            _ => holder.semaphore(name, 1),
        }
        .await
        .expect("holder acquires");
        reset_stats(&mut conn.clone()).await;
        let mut waiting = Vec::new();
        for (i, permits) in [1, 2].into_iter().enumerate() {
            let label = format!("fits_{kind}_{i}");
            let wait = match kind {
                "read" => waiter.read_lock(name),
                _ => waiter.semaphore(name, permits),
            }
            .metrics_label(label.clone());
            waiting.push((
                label,
                tokio::spawn(async move { wait.wait(Duration::from_secs(60)).await }),
            ));
            // Queued, and listening, before the next one starts: the next joins the live
            // channel before its first try, so no try of it is left to find the grant.
            wait_until("the waiter queued", GENEROUS, || {
                let (mut conn, queue) = (conn.clone(), queue.clone());
                async move { queued(&mut conn, &queue).await == i + 1 }
            })
            .await;
            subscribed_and_retried(&conn, &waiter, i as u64 + 1).await;
        }
        guard.release().await.expect("release");
        // Both hold before either lets go: the second's grant came with the first's.
        let mut held = Vec::new();
        for (label, wait) in waiting {
            held.push(wait.await.unwrap().expect("waiter acquires"));
            assert_eq!(
                woken_by_message(&label),
                1,
                "{label}: not woken by its grant message"
            );
        }
        for acquired in held {
            acquired.release().await.unwrap();
        }
    }
}

/// Wake-ups by message of the waits labelled `label` (`LockRequest::metrics_label`).
fn woken_by_message(label: &str) -> u64 {
    let labels = ["by=message", &format!("template={label}")];
    counter("distlock_wakeups_total", &labels)
}

/// Waits until `waiter`'s `waiters` waiters on one name (started one by one, each after
/// the one before listens) are subscribed (one channel) and the first one's retry after
/// subscribing, as well as every later one's first try (it joins the live channel first),
/// found the lock still held (stats reset before the first try): a release before those
/// would be found by the tries themselves, not by the message.
async fn subscribed_and_retried(
    conn: &redis::aio::MultiplexedConnection,
    waiter: &lock_core::LockClient,
    waiters: u64,
) {
    wait_until(
        "the waiter subscribed and tried again",
        GENEROUS,
        || async {
            let tries = function_calls(&mut conn.clone()).await.0.unwrap_or(0);
            waiter.waited_channels() == 1 && tries > waiters
        },
    )
    .await;
}

/// Subscriptions per pub/sub connection in Redis (`sub=` of `CLIENT LIST TYPE pubsub`; a
/// connection with none left is no pub/sub connection any more).
async fn subscriptions(conn: &mut redis::aio::MultiplexedConnection) -> Vec<usize> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(conn)
        .await
        .unwrap();
    list.lines()
        .filter_map(|line| line.split(' ').find_map(|f| f.strip_prefix("sub=")))
        .map(|n| n.parse().unwrap())
        .collect()
}

/// One pub/sub connection per client carries every channel it waits on: 5 waiters on 5
/// names are 5 subscriptions on one connection; once they have left, none is left behind
/// but each client's one revocation channel (it has held a lock, see `lock/revoke.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pubsub_connection_carries_every_channel() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let (holder, waiter) = (client(&server.url()), client(&server.url()));
    let mut guards = Vec::new();
    let mut waiting = Vec::new();
    for i in 0..5 {
        let name = format!("multi_{i}");
        guards.push(holder.lock(name.as_str()).await.unwrap());
        let waiter = waiter.clone();
        waiting.push(tokio::spawn(async move {
            waiter.lock(name).wait(Duration::from_secs(60)).await
        }));
    }
    wait_until("5 waiters subscribed", GENEROUS, || async {
        waiter.waited_channels() == 5
    })
    .await;
    // One connection: each lock's release channel (Redisson's) and grants channel.
    wait_until("Redis has the 10 subscriptions", GENEROUS, || {
        let mut conn = conn.clone();
        // The waiter's 5 release and 5 grant channels; the holder's revocation channel.
        async move {
            let mut subs = subscriptions(&mut conn).await;
            subs.sort_unstable();
            subs == [1, 10]
        }
    })
    .await;
    // Three leave by giving up, two by getting their lock.
    for task in waiting.drain(..3) {
        task.abort();
    }
    for guard in guards {
        guard.release().await.unwrap();
    }
    for task in waiting {
        task.await
            .unwrap()
            .expect("acquired")
            .release()
            .await
            .unwrap();
    }
    wait_until("no release channel left in Redis", GENEROUS, || {
        let mut conn = conn.clone();
        async move { subscriptions(&mut conn).await == [1, 1] }
    })
    .await;
    assert_eq!(waiter.waited_channels(), 0);
}

/// With the subscriber connection killed at the moment of release, the waiter still
/// acquires, at the latest by the holder's TTL.
#[tokio::test]
async fn waiter_acquires_when_the_message_is_missed() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let (holder, waiter) = (client(&server.url()), client(&server.url()));
    let lease = Duration::from_secs(3);
    let guard = holder
        .lock("missed")
        .lease(lease)
        .await
        .expect("holder acquires");
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.lock("missed").wait(Duration::from_secs(60)).await }
    });
    wait_until("the waiter subscribed", GENEROUS, || async {
        waiter.waited_channels() == 1
    })
    .await;
    let started = Instant::now();
    let _: () = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut conn)
        .await
        .unwrap();
    guard.release().await.expect("release");
    let acquired = tokio::time::timeout(lease + GENEROUS, waiting)
        .await
        .expect("waiter acquired")
        .unwrap()
        .expect("no error");
    assert!(
        started.elapsed() < lease + Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    acquired.release().await.unwrap();
}

/// Many waiters on one lock: each acquires exactly once and none is stranded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_waiters_all_get_their_turn() {
    let server = RedisServer::start();
    let locks = client(&server.url());
    let guard = locks.lock("queue").await.unwrap();
    let waiters: Vec<_> = (0..20)
        .map(|_| {
            let locks = locks.clone();
            tokio::spawn(async move {
                let g = locks
                    .lock("queue")
                    .wait(Duration::from_secs(60))
                    .await
                    .unwrap();
                g.release().await.unwrap();
            })
        })
        .collect();
    guard.release().await.unwrap();
    for w in waiters {
        tokio::time::timeout(GENEROUS, w)
            .await
            .expect("waiter done")
            .unwrap();
    }
    assert_eq!(locks.waited_channels(), 0);
}

/// The pub/sub connection's keep-alive ping (every 5 s) keeps the connection: a waiting
/// client listens on the same connection 7 s later. (A reply to PING in subscribed mode is
/// an array; read as a string it failed, and the connection was made again every 5 s — a
/// hand-off in that gap found nobody listening and skipped every waiter of the client.)
#[tokio::test]
async fn the_keep_alive_ping_keeps_the_pubsub_connection() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let (holder, waiter) = (client(&server.url()), client(&server.url()));
    let held = holder.lock("ping").await.unwrap();
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.lock("ping").wait(GENEROUS).await }
    });
    let pubsub_ids = |mut conn: redis::aio::MultiplexedConnection| async move {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .arg("TYPE")
            .arg("pubsub")
            .query_async(&mut conn)
            .await
            .unwrap();
        let mut ids: Vec<String> = list
            .lines()
            .filter_map(|l| l.split(' ').next().map(str::to_owned))
            .collect();
        ids.sort();
        ids
    };
    wait_until("the waiter listens", GENEROUS, || async {
        waiter.waited_channels() == 1
    })
    .await;
    let before = pubsub_ids(conn.clone()).await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    // A connection made again has a new id and its old one is gone. (A new id beside the old
    // ones is another connection: the holder's revocation listener, late on a busy machine.)
    let after = pubsub_ids(conn.clone()).await;
    let gone: Vec<_> = before.iter().filter(|id| !after.contains(id)).collect();
    assert!(
        gone.is_empty(),
        "the pub/sub connection was made again: {gone:?} gone, now {after:?}"
    );
    held.release().await.unwrap();
    waiting.await.unwrap().unwrap().release().await.unwrap();
}
