//! The watchdog keeps locks without an explicit lease alive, and stops with the guard.

use std::time::Duration;

use distlock_tests::locks::{builder, exists, lock_key, pttl, wait_gone, wait_until, GENEROUS};
use distlock_tests::RedisServer;

/// A guard with a 1 s lease and no explicit lease, held for 5 s, stays held.
#[tokio::test]
async fn renews_a_held_lock_past_its_lease() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = builder(&server.url())
        .lease(Duration::from_secs(1))
        .build()
        .unwrap();
    let guard = locks.lock("long-job").await.expect("acquire");
    assert_eq!(locks.renewing(), 1);
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    while tokio::time::Instant::now() < until {
        assert!(
            exists(&mut conn, &lock_key("long-job")).await,
            "lock expired while held"
        );
        assert!(guard.is_held());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ttl = pttl(&mut conn, &lock_key("long-job")).await;
    assert!(ttl > 0 && ttl <= 1_000, "pttl {ttl}");
    guard.release().await.expect("release");
    assert_eq!(locks.renewing(), 0);
    assert!(!exists(&mut conn, &lock_key("long-job")).await);
}

/// Dropping a guard stops its renewal at once and the key disappears.
#[tokio::test]
async fn dropped_guard_stops_renewal_and_disappears() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = builder(&server.url())
        .lease(Duration::from_secs(1))
        .build()
        .unwrap();
    let guard = locks.lock("dropped").await.expect("acquire");
    drop(guard);
    assert_eq!(
        locks.renewing(),
        0,
        "renewal must stop the moment the guard is dropped"
    );
    wait_gone(&mut conn, &lock_key("dropped"), Duration::from_secs(1)).await;
}

/// Explicit leases are not renewed: the key's PTTL only falls.
#[tokio::test]
async fn explicit_lease_is_not_renewed() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = builder(&server.url())
        .lease(Duration::from_millis(300))
        .build()
        .unwrap();
    let guard = locks
        .lock("leased")
        .lease(Duration::from_millis(600))
        .await
        .expect("acquire");
    assert_eq!(locks.renewing(), 0);
    wait_gone(&mut conn, &lock_key("leased"), GENEROUS).await;
    wait_until("the guard notices", GENEROUS, || async { !guard.is_held() }).await;
}

/// `max_hold` bounds how long the watchdog keeps a lock alive.
#[tokio::test]
async fn max_hold_stops_renewal() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = builder(&server.url())
        .lease(Duration::from_millis(600))
        .max_hold(Duration::from_millis(700))
        .build()
        .unwrap();
    let guard = locks.lock("bounded").await.expect("acquire");
    tokio::time::timeout(GENEROUS, guard.lost())
        .await
        .expect("lost fires once max_hold stops renewal");
    wait_gone(&mut conn, &lock_key("bounded"), GENEROUS).await;
}
