use lock_core::{distributed_lock, LockError};

#[distributed_lock(key = "export_<tenant>", mode = "write", permits = 3)]
async fn export(tenant: u64) -> Result<u64, LockError> {
    Ok(tenant)
}

fn main() {}
