//! Fencing tokens only grow.

use std::sync::Arc;
use std::time::Duration;

use distlock_tests::locks::{client, lock_key, wait_gone, GENEROUS};
use distlock_tests::RedisServer;
use tokio::sync::Mutex;

/// 1,008 acquisitions by 4 clients × 4 tasks, most of them hand-offs: each token is greater
/// than the last one seen by any holder before it, so none is handed out twice. (Tokens are
/// the Redis clock in µs at the grant: increasing, not dense.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_strictly_increase_across_clients() {
    let server = RedisServer::start();
    // (last token, acquisitions)
    let seen = Arc::new(Mutex::new((0u64, 0usize)));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let locks = client(&server.url());
        for _ in 0..4 {
            let (locks, seen) = (locks.clone(), seen.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..1_000 / 16 + 1 {
                    let guard = locks
                        .lock("fenced")
                        .wait(Duration::from_secs(60))
                        .await
                        .unwrap();
                    let token = guard.fencing_token();
                    let mut seen = seen.lock().await;
                    let (last, count) = &mut *seen;
                    assert!(token > *last, "{token} after {last}");
                    (*last, *count) = (token, *count + 1);
                    drop(seen);
                    guard.release().await.unwrap();
                }
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    let (_, count) = *seen.lock().await;
    assert_eq!(count, 16 * (1_000 / 16 + 1));
}

/// A lock that expired still never hands out a smaller token; re-entry keeps the token.
#[tokio::test]
async fn tokens_grow_across_expiry_and_reentry_keeps_them() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = client(&server.url());
    let first = locks
        .lock("expiring")
        .lease(Duration::from_millis(100))
        .await
        .unwrap();
    let t1 = first.fencing_token();
    std::mem::forget(first);
    wait_gone(&mut conn, &lock_key("expiring"), GENEROUS).await;
    lock_core::scope(async {
        let second = locks.lock("expiring").await.unwrap();
        assert!(second.fencing_token() > t1);
        let again = locks.lock("expiring").await.unwrap();
        assert_eq!(again.fencing_token(), second.fencing_token());
    })
    .await;
}
