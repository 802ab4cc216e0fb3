use lock_core::{distributed_lock, LockError};

// The attribute is wrong, but the function is still emitted: `main` finds it, and the only
// error is the attribute's.
#[distributed_lock(key = "item_<id>", timeout = "2s")]
async fn buy(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

fn main() {
    drop(buy(1));
}
