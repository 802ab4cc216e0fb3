use lock_core::{distributed_lock, LockError};

#[distributed_lock(key = "item_<item_idd>")]
async fn buy(item_id: u64, quantity: u32) -> Result<u32, LockError> {
    Ok(quantity + item_id as u32)
}

fn main() {}
