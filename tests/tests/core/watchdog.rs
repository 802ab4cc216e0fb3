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

/// Released or dropped, a guard's lock is renewed no more even when its key stays: with a
/// second hold count in Redis (as a Redisson owner re-entering would leave), the release
/// only decrements it, and from then on the key's PTTL only falls until it expires.
#[tokio::test]
async fn released_and_dropped_guards_are_renewed_no_more() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = builder(&server.url())
        .lease(Duration::from_millis(900))
        .build()
        .unwrap();
    for release in [true, false] {
        let name = format!("kept_{release}");
        let key = lock_key(&name);
        let guard = locks.lock(name.as_str()).await.expect("acquire");
        let owner = locks.inspect(name.as_str()).await.unwrap();
        let owner = owner.owner().expect("held").to_owned();
        let () = redis::AsyncCommands::hincr(&mut conn, &key, &owner, 1)
            .await
            .unwrap();
        if release {
            guard.release().await.expect("a hold remains: not an error");
        } else {
            drop(guard);
        }
        assert_eq!(locks.renewing(), 0);
        // The release's own PEXPIRE comes first (a dropped guard releases in the background).
        wait_until("the release decremented the count", GENEROUS, || {
            let (mut conn, key, owner) = (conn.clone(), key.clone(), owner.clone());
            async move {
                let count: Option<u64> = redis::AsyncCommands::hget(&mut conn, &key, &owner)
                    .await
                    .unwrap();
                count == Some(1)
            }
        })
        .await;
        // Sampled over the lease and beyond: the watchdog ticks every 300 ms.
        let mut last = i64::MAX;
        let deadline = tokio::time::Instant::now() + GENEROUS;
        loop {
            let ttl = pttl(&mut conn, &key).await;
            if ttl == -2 {
                break;
            }
            assert!(
                ttl <= last,
                "{name}: renewed after the guard went ({last} → {ttl} ms)"
            );
            assert!(
                tokio::time::Instant::now() < deadline,
                "{name}: never expired"
            );
            last = ttl;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
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
