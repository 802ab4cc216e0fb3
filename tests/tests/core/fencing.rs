//! Fencing tokens only grow.

use std::sync::Arc;
use std::time::Duration;

use distlock_tests::locks::{
    client, lock_key, queue_key, queued, rw_queue_key, wait_gone, wait_until, GENEROUS,
};
use distlock_tests::RedisServer;
use redis::AsyncCommands as _;
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

/// A hand-off's token is above the last holder's even where the Redis clock is behind it
/// (a clock stepped back, a failover to a slower clock): the record's token is moved ahead
/// of the clock, then the lock is handed to a waiter; for the exclusive lock and the writers'
/// side. A last token of 16 digits is compared as text, one of another length as a number
/// (tokens are exact up to 2^53, the year 2255 in µs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_outbids_a_last_token_ahead_of_the_clock() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let (holder, waiter) = (client(&server.url()), client(&server.url()));
    // (the case, the last token made of the holder's)
    type Last = (&'static str, fn(u64) -> u64);
    let lasts: [Last; 3] = [
        ("a second ahead", |token| token + 1_000_000),
        ("ahead, 16 digits", |_| 8_999_999_999_999_999),
        ("behind, 15 digits", |_| 100_000_000_000_000),
    ];
    for (i, (kind, (case, last_of))) in ["lock", "write"]
        .into_iter()
        .flat_map(|kind| lasts.map(|last| (kind, last)))
        .enumerate()
    {
        let name = format!("ahead_{i}");
        let request = |locks: &lock_core::LockClient| match kind {
            "lock" => locks.lock(&name),
            _ => locks.write_lock(&name),
        };
        let guard = request(&holder).await.expect("holder acquires");
        // The holder's record: `distlock:holder`, or a read-write lock's `distlock:holder:<owner>`.
        let key = lock_key(&name);
        let fields: Vec<(String, String)> = conn.hgetall(&key).await.unwrap();
        let (field, record) = fields
            .into_iter()
            .find(|(f, _)| f.starts_with("distlock:holder"))
            .expect("the holder's record");
        let (token, rest) = record.split_once('\u{1f}').expect("a record");
        let last = last_of(token.parse::<u64>().unwrap());
        let _: () = conn
            .hset(&key, &field, format!("{last}\u{1f}{rest}"))
            .await
            .unwrap();
        let waiting = tokio::spawn({
            let wait = request(&waiter);
            async move { wait.wait(GENEROUS).await }
        });
        let queue = match kind {
            "lock" => queue_key(&name),
            _ => rw_queue_key(&name),
        };
        wait_until("the waiter queued", GENEROUS, || {
            let (mut conn, queue) = (conn.clone(), queue.clone());
            async move { queued(&mut conn, &queue).await == 1 }
        })
        .await;
        guard.release().await.expect("release");
        let handed = waiting.await.unwrap().expect("the waiter acquires");
        assert!(
            handed.fencing_token() > last,
            "{kind}, {case}: {} after {last}",
            handed.fencing_token()
        );
        handed.release().await.unwrap();
    }
}
