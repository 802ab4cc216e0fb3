use lock_core::{distributed_lock, LockError};

#[distributed_lock(key = "item_<item_id>")]
async fn buy(id: u64, quantity: u32) -> Result<u64, LockError> {
    Ok(id + u64::from(quantity))
}

fn main() {}
