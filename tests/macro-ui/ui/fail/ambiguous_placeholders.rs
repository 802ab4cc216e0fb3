use lock_core::{distributed_lock, LockError};

#[distributed_lock(key = "<shop>_<item>")]
async fn buy(shop: u64, item: u64) -> Result<u64, LockError> {
    Ok(shop + item)
}

fn main() {}
