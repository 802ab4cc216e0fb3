//! Scheduled jobs with ShedLock's semantics: [`LockClient::job`](crate::LockClient::job)
//! gives a [`JobRequest`] that runs a fire on one instance of the fleet and skips it on the
//! others, saying which happened in a [`JobOutcome`] (a skip carries [`Skipped`]), and
//! keeps the name held for a minimum time after the start.

// The request, the outcome's type, and the hold kept after a fast fire (`linger`).
pub(crate) mod linger;
pub(crate) mod outcome;
pub(crate) mod request;

pub use outcome::{JobOutcome, Skipped};
pub use request::JobRequest;
