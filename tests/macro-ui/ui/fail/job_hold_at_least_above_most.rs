use lock_core::{distributed_lock, job::JobOutcome, LockError};

// The body returns the job's `Result<u32, _>`: the options error comes alone, without a
// follow-on type error on the body.
#[distributed_lock(key = "report_<day>", on_busy = "skip", hold_at_least = "2h", hold_at_most = "1h")]
async fn report(day: u32) -> Result<JobOutcome<u32>, LockError> {
    Ok(day)
}

fn main() {}
