use lock_core::{distributed_lock, LockError};

#[distributed_lock(key = "report_<day>", on_busy = "skip")]
async fn report(day: u32) -> Result<u32, LockError> {
    Ok(day)
}

fn main() {}
