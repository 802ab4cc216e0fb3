//! Mutual exclusion under contention from several clients and tasks.

use std::sync::Arc;
use std::time::Duration;

use distlock_tests::locks::{client, function_calls, reset_stats, OverlapDetector};
use distlock_tests::RedisServer;
use redis::AsyncCommands;

const CLIENTS: usize = 4;
const TASKS_PER_CLIENT: usize = 8;
const ACQUISITIONS: usize = 2_000;

/// 4 clients × 8 tasks, 2,000 acquisitions of one name, each doing a non-atomic
/// GET → +1 → SET: the counter is exact and no two critical sections overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn non_atomic_counter_is_exact_under_contention() {
    let server = RedisServer::start();
    let detector = Arc::new(OverlapDetector::default());
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let locks = client(&server.url());
        for t in 0..TASKS_PER_CLIENT {
            let n = ACQUISITIONS / (CLIENTS * TASKS_PER_CLIENT)
                + usize::from(
                    c * TASKS_PER_CLIENT + t < ACQUISITIONS % (CLIENTS * TASKS_PER_CLIENT),
                );
            let (locks, detector, mut conn) =
                (locks.clone(), detector.clone(), server.conn().await);
            tasks.push(tokio::spawn(async move {
                for _ in 0..n {
                    let guard = locks
                        .lock("counter")
                        .wait(Duration::from_secs(60))
                        .await
                        .expect("acquire");
                    detector.enter();
                    let value: i64 = conn.get("counter").await.unwrap_or(0);
                    tokio::task::yield_now().await;
                    let () = conn.set("counter", value + 1).await.expect("SET");
                    detector.exit();
                    guard.release().await.expect("release");
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("task");
    }
    let mut conn = server.conn().await;
    let counter: usize = conn.get("counter").await.expect("GET");
    assert_eq!(counter, ACQUISITIONS);
    assert_eq!(detector.entries(), ACQUISITIONS);
    assert_eq!(detector.overlaps(), 0);
}

/// A busy `try_acquire` is one script call and leaves nothing behind, for every kind: it is
/// never queued, so no clean-up call follows (the layers' busy answers cost one round trip).
#[tokio::test]
async fn a_busy_try_costs_one_call_and_leaves_nothing() {
    let server = RedisServer::start();
    let (holder, trier) = (client(&server.url()), client(&server.url()));
    let mut conn = server.conn().await;
    let kinds = ["lock", "write lock", "semaphore"];
    let request = |locks: &lock_core::LockClient, kind: &str| match kind {
        "lock" => locks.lock("busy_lock"),
        "write lock" => locks.write_lock("busy_rw"),
        _ => locks.semaphore("busy_sem", 1),
    };
    let mut held = Vec::new();
    for kind in kinds {
        held.push(request(&holder, kind).await.unwrap());
        // Loads the library, so that the counted tries make no load.
        assert!(request(&trier, kind).try_acquire().await.unwrap().is_none());
    }
    let mut keys_before: Vec<String> = conn.keys("*").await.unwrap();
    for kind in kinds {
        reset_stats(&mut conn).await;
        assert!(request(&trier, kind).try_acquire().await.unwrap().is_none());
        let (calls, stats) = function_calls(&mut conn).await;
        assert_eq!(calls, Some(1), "{kind}: {stats}");
    }
    let mut keys_after: Vec<String> = conn.keys("*").await.unwrap();
    keys_before.sort();
    keys_after.sort();
    assert_eq!(keys_after, keys_before, "a busy try left keys behind");
    drop(held);
}
