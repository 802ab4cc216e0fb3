use lock_core::{distributed_lock, LockError};

fn code(_: LockError) -> u16 {
    409
}

#[distributed_lock(key = "item_<id>", map_err = code)]
async fn buy(id: u64) -> Result<u64, String> {
    Ok(id)
}

fn main() {}
