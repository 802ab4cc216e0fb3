use lock_core::{distributed_lock, LockError};

#[distributed_lock(key = "report_<day>", hold_at_least = "5m")]
async fn report(day: u32) -> Result<u32, LockError> {
    Ok(day)
}

fn main() {}
