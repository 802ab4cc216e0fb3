use lock_core::{distributed_lock, JobOutcome, LockError};

#[distributed_lock(key = "report_<day>", on_busy = "ignore")]
async fn report(day: u32) -> Result<JobOutcome<u32>, LockError> {
    // The body of a job returns `Result<u32, _>`; as written (the attribute refused), the
    // function is emitted unchanged, so the body here is left untyped.
    unimplemented!("{day}")
}

fn main() {}
