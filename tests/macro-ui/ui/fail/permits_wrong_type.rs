use lock_core::{distributed_lock, LockError};

const EXPORTS: i64 = 3;

#[distributed_lock(key = "export_<tenant>", permits = EXPORTS)]
async fn export(tenant: u64) -> Result<u64, LockError> {
    Ok(tenant)
}

fn main() {}
