//! Extreme settings are limits, not panics: `Duration::MAX` means "no limit" wherever a wait
//! or a bound is taken, and a lease out of range is refused naming the lock.

use std::time::Duration;

use distlock_tests::locks::{builder, lock_key, pttl, wait_until, GENEROUS};
use distlock_tests::RedisServer;

/// A `Duration::MAX` wait and hold limit: the lock is taken and kept renewed (the watchdog
/// did not die computing the limit), and a waiter with a `Duration::MAX` wait gets it after
/// the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duration_max_is_no_limit() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let locks = builder(&server.url())
        .lease(Duration::from_secs(2))
        .max_hold(Duration::MAX)
        .wait(Duration::MAX)
        .build()
        .unwrap();
    let guard = locks.lock("unbounded").await.expect("acquire");
    // Two and a half leases long: only renewals (every 667 ms) keep it; a stall of a second
    // on a loaded machine does not expire it.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(guard.is_held());
    assert!(pttl(&mut conn, &lock_key("unbounded")).await > 0);
    let waiter = tokio::spawn({
        let locks = locks.clone();
        async move { locks.lock("unbounded").wait(Duration::MAX).await }
    });
    wait_until("the waiter queued", GENEROUS, || async {
        locks.waited_channels() == 1
    })
    .await;
    guard.release().await.unwrap();
    let next = tokio::time::timeout(GENEROUS, waiter)
        .await
        .unwrap()
        .unwrap();
    next.expect("acquired after the release")
        .release()
        .await
        .unwrap();
}

/// A lease beyond a year (or below 10 ms) on a request or an extension is refused with the
/// lock named; the client-wide setting is refused when the client is built.
#[tokio::test]
async fn out_of_range_leases_are_refused_by_name() {
    let server = RedisServer::start();
    let locks = builder(&server.url()).build().unwrap();
    for lease in [
        Duration::MAX,
        Duration::from_secs(86_400 * 366),
        Duration::ZERO,
    ] {
        let err = locks.lock("leased").lease(lease).await.unwrap_err();
        assert!(
            err.to_string().contains("`leased`") && err.to_string().contains("lease"),
            "{err}"
        );
    }
    let guard = locks.lock("leased").await.unwrap();
    let err = guard.extend(Duration::MAX).await.unwrap_err();
    assert!(err.to_string().contains("`leased`"), "{err}");
    assert!(guard.is_held(), "a refused extension does not end the hold");
    let err = builder(&server.url())
        .lease(Duration::MAX)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("lease"), "{err}");
}
