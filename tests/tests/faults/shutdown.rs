//! Fault suite, graceful shutdown: a holder process that gets SIGTERM and shuts its client
//! down frees its locks at once, not after their leases.

use std::time::Duration;

use distlock_tests::fault::holder::{fields, HolderProcess};
use distlock_tests::locks::{client, exists, lock_key, GENEROUS};
use distlock_tests::RedisServer;
use tokio::time::Instant;

const HOLDER: &str = env!("CARGO_BIN_EXE_holder");
/// A lease long enough that a lock freed by its expiry could not pass the check below.
const LEASE: Duration = Duration::from_secs(30);

/// SIGTERM → `LockClient::shutdown()` → the lock and the permit are gone while their 30 s
/// leases have most of their time left, and the shut-down client refuses new locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_shutdown_frees_the_locks_at_once() {
    let server = RedisServer::start();
    let url = server.url();
    let lease_ms = LEASE.as_millis().to_string();
    let args = ["graceful", &url, "-", "shutdown_1", &lease_ms].map(String::from);
    let mut holder = HolderProcess::spawn(HOLDER, &args);
    holder.expect("HELD", GENEROUS).await;
    let mut conn = server.conn().await;
    assert!(exists(&mut conn, &lock_key("shutdown_1")).await);
    let signalled = Instant::now();
    holder.terminate();
    let line = holder.expect("SHUTDOWN", GENEROUS).await;
    let freed_after = signalled.elapsed();
    let reply = fields(&line);
    assert_eq!(reply["released"], "2", "{line}");
    assert_eq!(reply["then"], "shut_down", "{line}");
    assert!(!exists(&mut conn, &lock_key("shutdown_1")).await);
    // Free for another client at once: no wait.
    let other = client(&url);
    let guard = other.lock("shutdown_1").wait(Duration::ZERO).await;
    assert!(guard.is_ok(), "{guard:?}");
    let permits = other
        .semaphore("shutdown_1_sem", 1)
        .wait(Duration::ZERO)
        .await;
    assert!(permits.is_ok(), "the permit was given back: {permits:?}");
    assert!(
        freed_after < LEASE / 2,
        "freed {freed_after:?} after SIGTERM"
    );
    println!("faults::shutdown: SIGTERM to locks freed: {freed_after:?}");
    let (status, _) = holder.finish(GENEROUS).await;
    assert!(status.success(), "{status:?}");
}
