//! The lock's outcome on the request's span.
//!
//! lock-core's `distlock.acquire` and `distlock.hold` spans are children of the span current
//! where the acquisition runs: under a tracing layer (tower-http's `TraceLayer`), the
//! request's span, with nothing to set up. This adds the outcome to the request itself:
//! recorded into the request span's fields `distlock.acquire.outcome` and
//! `distlock.acquire.wait_duration` when its maker declared them (`tracing` records only
//! into declared fields: declare them `tracing::field::Empty`), and as a DEBUG event in it.

use std::time::Duration;

use lock_core::{LockError, LockGuard};
use tracing::Span;

/// The request span's field that gets the outcome (`acquired`, `timeout`, `unavailable`,
/// `error`), as lock-core's `distlock.acquire` span names it.
pub(crate) const OUTCOME: &str = "distlock.acquire.outcome";
/// The request span's field that gets the seconds the acquisition took.
pub(crate) const WAIT_DURATION: &str = "distlock.acquire.wait_duration";

/// Records how the request's acquisition ended, after `waited`, on the current span.
pub(crate) fn acquired(result: &Result<LockGuard, LockError>, waited: Duration) {
    let outcome = match result {
        Ok(_) => "acquired",
        Err(e) if e.is_wait_timeout() => "timeout",
        Err(e) if e.is_unavailable() => "unavailable",
        Err(_) => "error",
    };
    let waited = waited.as_secs_f64();
    let span = Span::current();
    span.record(OUTCOME, outcome);
    span.record(WAIT_DURATION, waited);
    tracing::debug!(
        distlock.acquire.outcome = outcome,
        distlock.acquire.wait_duration = waited,
        "distlock.layer.acquired"
    );
}
