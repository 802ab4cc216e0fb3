use lock_core::{distributed_lock, LockError};

struct Item {
    id: u64,
}

#[distributed_lock(key = "item_<item>")]
async fn buy(item: Item) -> Result<u64, LockError> {
    Ok(item.id)
}

fn main() {}
