//! Leases end: a holder that never releases blocks others only until its lease is over, and
//! a holder whose lease ran out cannot delete its successor's lock.

use std::process::Stdio;
use std::time::Duration;

use distlock_tests::locks::{builder, client, exists, lock_key, wait_gone, GENEROUS};
use distlock_tests::RedisServer;
use lock_core::LockError;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::time::Instant;

const CHILD_URL: &str = "DISTLOCK_TEST_CHILD_URL";

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

/// Child mode: when started by `killed_holder_blocks_only_until_its_lease_ends`, acquire a
/// watchdog lock, announce it, and hold it until killed (bounded at 60 s).
#[tokio::test]
async fn child_holder() {
    let Ok(url) = std::env::var(CHILD_URL) else {
        return;
    };
    let locks = builder(&url)
        .lease(Duration::from_secs(1))
        .build()
        .expect("client");
    let _guard = locks.lock("crashing").await.expect("acquire");
    println!("ACQUIRED");
    tokio::time::sleep(Duration::from_secs(60)).await;
}

/// A holder process SIGKILLed while its watchdog renews the lock blocks a waiter only until
/// the last renewed lease ends.
#[tokio::test]
async fn killed_holder_blocks_only_until_its_lease_ends() {
    let server = RedisServer::start();
    let mut child = tokio::process::Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "child_holder", "--nocapture", "--test-threads=1"])
        .env(CHILD_URL, server.url())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn child holder");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let announced = tokio::time::timeout(GENEROUS, async {
        while let Some(line) = lines.next_line().await.expect("read child") {
            if line.contains("ACQUIRED") {
                return true;
            }
        }
        false
    });
    assert!(
        announced.await.expect("child acquired in time"),
        "child exited early"
    );
    // Let the watchdog renew at least once, so the lease in Redis is a renewed one.
    tokio::time::sleep(Duration::from_millis(700)).await;
    child.kill().await.expect("SIGKILL child");
    let killed_at = Instant::now();
    let locks = client(&server.url());
    let guard = locks
        .lock("crashing")
        .wait(GENEROUS)
        .await
        .expect("acquire");
    let waited = killed_at.elapsed();
    assert!(
        waited < Duration::from_secs(1) + Duration::from_secs(3),
        "waited {waited:?}"
    );
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
