//! Leases end: a holder that never releases blocks others only until its lease is over, and
//! a holder whose lease ran out cannot delete its successor's lock. (A SIGKILLed holder
//! process: `faults::holder_crash`.)

use std::time::Duration;

use distlock_tests::locks::{client, exists, lock_key, wait_gone, GENEROUS};
use distlock_tests::RedisServer;
use lock_core::LockError;
use tokio::time::Instant;

/// A guard leaked with `mem::forget` (explicit lease) blocks a waiter only until its lease ends.
#[tokio::test]
async fn leaked_guard_blocks_only_until_its_lease_ends() {
    let server = RedisServer::start();
    let locks = client(&server.url());
    let lease = Duration::from_millis(500);
    std::mem::forget(locks.lock("leaked").lease(lease).await.expect("acquire"));
    let started = Instant::now();
    let guard = locks
        .lock("leaked")
        .wait(GENEROUS)
        .await
        .expect("acquired after the lease");
    let waited = started.elapsed();
    assert!(waited < lease + Duration::from_secs(3), "waited {waited:?}");
    guard.release().await.expect("release");
}

/// A's lease expires, B acquires, A releases → B's lock is intact and A gets "not held".
#[tokio::test]
async fn late_release_does_not_delete_the_successors_lock() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let (a, b) = (client(&server.url()), client(&server.url()));
    let guard_a = a
        .lock("safe")
        .lease(Duration::from_millis(200))
        .await
        .expect("A acquires");
    wait_gone(&mut conn, &lock_key("safe"), GENEROUS).await;
    let guard_b = b.lock("safe").wait(GENEROUS).await.expect("B acquires");
    let err = guard_a.release().await.expect_err("A no longer holds it");
    assert!(matches!(err, LockError::NotHeld { .. }), "{err}");
    assert!(err.to_string().contains("`safe`"), "{err}");
    assert!(
        exists(&mut conn, &lock_key("safe")).await,
        "B's lock was deleted"
    );
    assert!(guard_b.is_held());
    guard_b.release().await.expect("B releases");
}
