//! `crate = "…"` for a crate that re-exports lock-core.
mod reexport {
    pub use lock_core as locks;
}

use lock_core::LockError;
use reexport::locks::distributed_lock;

#[distributed_lock(key = "item_<id>", crate = "crate::pass::crate_path::reexport::locks")]
async fn buy(id: u64) -> Result<u64, LockError> {
    let token = reexport::locks::current_lock().map(|l| l.fencing_token());
    Ok(id + token.unwrap_or_default())
}

/// Expands and type-checks (the futures are made, never run).
#[test]
fn expands() {
    drop(buy(1));
}
