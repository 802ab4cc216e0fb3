//! Scheduled jobs (`on_busy = "skip"`): the function returns `Result<JobOutcome<T>, E>`,
//! the body `Result<T, E>` with `?`; holds in every unit; with a client, `map_err`, `wait`.
use lock_core::job::JobOutcome;
use lock_core::{distributed_lock, LockClient, LockError};

#[distributed_lock(
    key = "report_<day>",
    on_busy = "skip",
    hold_at_least = "5m",
    hold_at_most = "1h"
)]
async fn report(day: u32) -> Result<JobOutcome<u32>, LockError> {
    let rows: u32 = day.checked_mul(2).ok_or(LockError::NoDefaultClient)?;
    Ok(rows)
}

#[distributed_lock(key = "sweep", on_busy = "skip", client = locks, map_err = |e| e.to_string())]
async fn sweep(locks: &LockClient) -> Result<JobOutcome<()>, String> {
    Ok(())
}

#[distributed_lock(
    key = "warm_<n>",
    on_busy = "skip",
    wait = "100ms",
    hold_at_most = "1m30s"
)]
async fn warm(n: u8) -> Result<JobOutcome<Vec<u8>>, LockError> {
    Ok(vec![n])
}

/// `on_busy = "wait"` is the default, written out: an ordinary locked function.
#[distributed_lock(key = "item_<id>", on_busy = "wait")]
async fn wait_explicitly(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

#[test]
fn scheduled_jobs_expand() {
    drop(report(1));
    drop(warm(2));
    drop(wait_explicitly(3));
    let _ = sweep;
}
