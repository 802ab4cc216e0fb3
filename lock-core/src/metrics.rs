//! Metrics through the `metrics` facade (feature `metrics`): any exporter works. Without the
//! feature every hook is an empty function.
//!
//! Every metric is labelled by the lock's `family` (see
//! [`LockRequest::family`](crate::LockRequest::family)), never by the lock's name, so the
//! number of series stays bounded. The names are listed in the crate documentation.
#![cfg_attr(not(feature = "metrics"), allow(dead_code))]

use std::borrow::Cow;
use std::time::Duration;

use crate::error::LockError;

/// A bounded label: the key template a lock name was made from, or [`DEFAULT_FAMILY`].
pub(crate) type Family = Cow<'static, str>;

/// The family of requests that name none.
pub(crate) const DEFAULT_FAMILY: &str = "default";

/// Acquisition attempts by outcome (`acquired`, `timeout`, `unavailable`).
pub(crate) const ACQUISITIONS: &str = "distlock_acquisitions_total";
/// Acquisitions that found the lock busy at first and had to wait (or gave up at once).
pub(crate) const CONTENDED: &str = "distlock_contended_total";
/// Seconds an acquisition waited, by outcome.
pub(crate) const WAIT_SECONDS: &str = "distlock_wait_seconds";
/// Seconds a lock was held, from acquisition to release or loss.
pub(crate) const HOLD_SECONDS: &str = "distlock_hold_seconds";
/// Waiter wake-ups, by what woke them (`message`: a release or hand-off published on the
/// lock's channel; `ttl`: a timed retry, when the holder's remaining lease ran out or, in a
/// long wait, the waiter's periodic retry came first).
pub(crate) const WAKEUPS: &str = "distlock_wakeups_total";
/// Watchdog renewals that Redis confirmed (and successful `extend` calls).
pub(crate) const RENEWALS: &str = "distlock_renewals_total";
/// Renewals that got no answer from Redis (the lock is not lost yet: its lease decides).
pub(crate) const RENEWAL_FAILURES: &str = "distlock_renewal_failures_total";
/// Holds that were lost (found deleted, expired or taken over, or their lease ran out).
pub(crate) const LOST: &str = "distlock_lost_total";
/// Locks this process holds right now.
pub(crate) const HELD: &str = "distlock_held";

/// An acquisition ended: records its outcome, wait and contention. Re-entries, invalid
/// input and cancelled acquisitions are not acquisitions and record nothing.
pub(crate) fn acquisition(
    family: &Family,
    result: Result<(), &LockError>,
    waited: Duration,
    contended: bool,
) {
    #[cfg(feature = "metrics")]
    {
        let outcome = match result {
            Ok(()) => "acquired",
            Err(e) if e.is_wait_timeout() => "timeout",
            Err(e) if e.is_unavailable() => "unavailable",
            Err(_) => return,
        };
        ::metrics::counter!(ACQUISITIONS, "family" => family.clone(), "outcome" => outcome)
            .increment(1);
        ::metrics::histogram!(WAIT_SECONDS, "family" => family.clone(), "outcome" => outcome)
            .record(waited.as_secs_f64());
        if contended {
            ::metrics::counter!(CONTENDED, "family" => family.clone()).increment(1);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (family, result, waited, contended);
}

/// A waiter woke up, `by` a `"message"` or the holder's `"ttl"`.
pub(crate) fn woken(family: &Family, by: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(WAKEUPS, "family" => family.clone(), "by" => by).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (family, by);
}

/// A hold began (a fresh acquisition in Redis, not a re-entry).
pub(crate) fn hold_started(family: &Family) {
    #[cfg(feature = "metrics")]
    ::metrics::gauge!(HELD, "family" => family.clone()).increment(1.0);
    #[cfg(not(feature = "metrics"))]
    let _ = family;
}

/// A hold ended (released or lost) after `held_for`; called once per hold.
pub(crate) fn hold_ended(family: &Family, held_for: Duration) {
    #[cfg(feature = "metrics")]
    {
        ::metrics::gauge!(HELD, "family" => family.clone()).decrement(1.0);
        ::metrics::histogram!(HOLD_SECONDS, "family" => family.clone())
            .record(held_for.as_secs_f64());
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (family, held_for);
}

/// Redis confirmed a renewal of one lock.
pub(crate) fn renewed(family: &Family) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(RENEWALS, "family" => family.clone()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = family;
}

/// A renewal of one lock got no answer (Redis error or timeout).
pub(crate) fn renewal_failed(family: &Family) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(RENEWAL_FAILURES, "family" => family.clone()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = family;
}

/// A hold was lost.
pub(crate) fn lost(family: &Family) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(LOST, "family" => family.clone()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = family;
}
