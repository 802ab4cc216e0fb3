//! The Lua scripts are sent as EVALSHA and loaded again on NOSCRIPT, so `SCRIPT FLUSH` (or a
//! restart, or a failover to a replica that never saw them) costs one extra round trip.

use std::time::Duration;

use distlock_tests::locks::{builder, exists, lock_key, pttl, wait_until, GENEROUS};
use distlock_tests::RedisServer;

async fn flush(conn: &mut redis::aio::MultiplexedConnection) {
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(conn)
        .await
        .unwrap();
}

/// Acquire, watchdog renewal, release and a hand-off each work right after `SCRIPT FLUSH`.
#[tokio::test]
async fn every_script_survives_script_flush() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = builder(&server.url())
        .lease(Duration::from_millis(600))
        .build()
        .unwrap();
    flush(&mut conn).await;
    let guard = locks.lock("flushed").await.expect("acquire after a flush");
    flush(&mut conn).await;
    // The PTTL falls, then a renewal (every 200 ms) lifts it again: one ran after the flush.
    for (what, above) in [("the lease ran down", false), ("a renewal", true)] {
        wait_until(what, GENEROUS, || {
            let mut conn = conn.clone();
            async move { (pttl(&mut conn, &lock_key("flushed")).await > 500) == above }
        })
        .await;
    }
    assert!(guard.is_held());
    let waiting = tokio::spawn({
        let locks = locks.clone();
        async move { locks.lock("flushed").wait(GENEROUS).await }
    });
    wait_until("the waiter queued", GENEROUS, || async {
        locks.waited_channels() == 1
    })
    .await;
    flush(&mut conn).await;
    guard.release().await.expect("release after a flush");
    let next = waiting.await.unwrap().expect("handed over after a flush");
    flush(&mut conn).await;
    next.release().await.unwrap();
    assert!(!exists(&mut conn, &lock_key("flushed")).await);
}
