use lock_core::{distributed_lock, job::JobOutcome, LockError};

#[distributed_lock(key = "report_<day>", on_busy = "skip", lease = "1h")]
async fn report(day: u32) -> Result<JobOutcome<u32>, LockError> {
    // A job's body (`Result<u32, _>`): the options error comes alone, without a follow-on
    // type error here.
    Ok(day)
}

fn main() {}
