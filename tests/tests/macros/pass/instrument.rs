//! Stacks with `#[tracing::instrument]`, above and below.
use lock_core::{distributed_lock, LockError};

#[tracing::instrument]
#[distributed_lock(key = "outer_<id>")]
async fn instrument_outside(id: u64) -> Result<u64, LockError> {
    tracing::info!("inside");
    Ok(id)
}

#[distributed_lock(key = "inner_<id>")]
#[tracing::instrument(err)]
async fn instrument_inside(id: u64) -> Result<u64, LockError> {
    tracing::info!("inside");
    Ok(id)
}

fn assert_send<F: std::future::Future + Send>(_: F) {}

/// Expands and type-checks (the futures are made, never run).
#[test]
fn expands() {
    assert_send(instrument_outside(1));
    assert_send(instrument_inside(1));
}
