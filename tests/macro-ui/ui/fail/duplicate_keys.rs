use lock_core::{distributed_lock, LockError};

#[distributed_lock(keys = ["acct_<from>", "acct_<to>", "acct_<from>"])]
async fn transfer(from: u64, to: u64) -> Result<u64, LockError> {
    Ok(from + to)
}

fn main() {}
