//! The macro form of each kind: `#[distributed_lock]` functions whose body answers whether
//! Redis shows the hold it runs under.

use lock_core::job::JobOutcome;
use lock_core::{distributed_lock, LockClient, LockError};

/// Inside a locked body: true when Redis shows the innermost hold held.
async fn held_here(locks: &LockClient) -> Result<bool, LockError> {
    let info = lock_core::current_lock().expect("the body runs under a hold");
    Ok(locks.inspect(info.name().clone()).await?.is_held())
}

#[distributed_lock(key = "<name>", client = locks, wait = "10s")]
pub(crate) async fn lock(locks: &LockClient, name: &str) -> Result<bool, LockError> {
    held_here(locks).await
}

#[distributed_lock(key = "<name>", mode = "read", client = locks, wait = "10s")]
pub(crate) async fn read(locks: &LockClient, name: &str) -> Result<bool, LockError> {
    held_here(locks).await
}

#[distributed_lock(key = "<name>", mode = "write", client = locks, wait = "10s")]
pub(crate) async fn write(locks: &LockClient, name: &str) -> Result<bool, LockError> {
    held_here(locks).await
}

#[distributed_lock(key = "<name>", permits = 1, client = locks, wait = "10s")]
pub(crate) async fn semaphore(locks: &LockClient, name: &str) -> Result<bool, LockError> {
    held_here(locks).await
}

#[distributed_lock(keys = ["<name>_a", "<name>_b"], client = locks, wait = "10s")]
pub(crate) async fn lock_all(locks: &LockClient, name: &str) -> Result<bool, LockError> {
    held_here(locks).await
}

#[distributed_lock(key = "<name>", on_busy = "skip", client = locks)]
pub(crate) async fn job(locks: &LockClient, name: &str) -> Result<JobOutcome<bool>, LockError> {
    held_here(locks).await
}
