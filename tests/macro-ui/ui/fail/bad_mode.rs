use lock_core::{distributed_lock, LockError};

#[distributed_lock(key = "item_<id>", mode = "shared")]
async fn buy(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

fn main() {}
