use lock_core::{distributed_lock, LockError};

// A type in the template is lock-tower's (it parses request text); here the parameter has one.
#[distributed_lock(key = "item_<id:u64>")]
async fn buy(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

fn main() {}
