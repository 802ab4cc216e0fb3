//! `Retry-After` for a busy lock: when this layer expects the lock to be free.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use lock_core::LockError;

/// The hold times this layer has seen: a moving average of how long its requests held the
/// lock, from acquisition to release.
#[derive(Debug, Default)]
pub(crate) struct HoldTimes {
    /// Milliseconds; 0 until the first hold ends.
    mean_ms: AtomicU64,
}

impl HoldTimes {
    /// Weight of the newest hold in the average: 1/8, so that a change of load shows within
    /// a few requests while one outlier does not swing the hint.
    const WEIGHT_SHIFT: u32 = 3;

    /// Adds one finished hold.
    pub(crate) fn record(&self, held: Duration) {
        let held = u64::try_from(held.as_millis()).unwrap_or(u64::MAX).max(1);
        // A lost race between two updates only drops one sample from the average.
        let mean = self.mean_ms.load(Ordering::Relaxed);
        let next = if mean == 0 {
            held
        } else {
            let mean = i128::from(mean);
            let delta = (i128::from(held) - mean) >> Self::WEIGHT_SHIFT;
            u64::try_from(mean + delta).unwrap_or(1).max(1)
        };
        self.mean_ms.store(next, Ordering::Relaxed);
    }

    fn mean(&self) -> Option<Duration> {
        match self.mean_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    /// The hint for a request that found the lock busy (`error` is its wait timeout):
    ///
    /// - the mean hold time, less how long the current holder has held the lock (from its
    ///   holder record); before any hold ended, `wait` (what one more attempt waits anyway);
    /// - never beyond the holder's remaining lease, when Redis reported one;
    /// - in whole seconds, rounded up, at least 1 (`0` would only meet the holder again).
    pub(crate) fn retry_after(
        &self,
        error: &LockError,
        wait: Duration,
        now: SystemTime,
    ) -> Duration {
        let (remaining_lease, holder) = match error {
            LockError::WaitTimeout {
                remaining_ttl,
                holder,
                ..
            } => (*remaining_ttl, holder.as_deref()),
            _ => (None, None),
        };
        let estimate = match self.mean() {
            Some(mean) => {
                let held = holder
                    .and_then(|h| now.duration_since(h.acquired_at()).ok())
                    .unwrap_or_default();
                mean.saturating_sub(held)
            }
            None => wait,
        };
        let estimate = remaining_lease.map_or(estimate, |lease| estimate.min(lease));
        whole_seconds(estimate)
    }
}

/// Rounds up to whole seconds, at least 1.
fn whole_seconds(d: Duration) -> Duration {
    let secs = u64::try_from(d.as_millis().div_ceil(1000)).unwrap_or(u64::MAX);
    Duration::from_secs(secs.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(remaining_ttl: Option<Duration>) -> LockError {
        LockError::WaitTimeout {
            name: "item_7".into(),
            waited: Duration::ZERO,
            remaining_ttl,
            holder: None,
        }
    }

    fn secs(d: Duration) -> u64 {
        d.as_secs()
    }

    #[test]
    fn without_history_the_wait_bounded_by_the_lease() {
        let holds = HoldTimes::default();
        let now = SystemTime::now();
        let wait = Duration::from_millis(2500);
        assert_eq!(secs(holds.retry_after(&busy(None), wait, now)), 3);
        let lease = Some(Duration::from_millis(1200));
        assert_eq!(secs(holds.retry_after(&busy(lease), wait, now)), 2);
        assert_eq!(secs(holds.retry_after(&busy(None), Duration::ZERO, now)), 1);
    }

    /// A watchdog lease says nothing of when the lock is free: 1 s holds must answer 1,
    /// not the 28 s left of a 30 s lease.
    #[test]
    fn the_mean_hold_wins_over_a_long_lease() {
        let holds = HoldTimes::default();
        for _ in 0..20 {
            holds.record(Duration::from_millis(900));
        }
        let now = SystemTime::now();
        let lease = Some(Duration::from_secs(28));
        assert_eq!(
            secs(holds.retry_after(&busy(lease), Duration::from_secs(30), now)),
            1
        );
        holds.record(Duration::from_secs(20));
        let mean = holds.mean().unwrap();
        assert!(
            mean > Duration::from_millis(900) && mean < Duration::from_secs(4),
            "{mean:?}"
        );
    }

    #[test]
    fn the_average_follows_a_change_of_hold_times() {
        let holds = HoldTimes::default();
        holds.record(Duration::from_secs(1));
        for _ in 0..40 {
            holds.record(Duration::from_secs(20));
        }
        let mean = holds.mean().unwrap();
        assert!(mean > Duration::from_millis(19_900), "{mean:?}");
    }

    #[test]
    fn rounding_is_up_and_never_zero() {
        assert_eq!(whole_seconds(Duration::ZERO), Duration::from_secs(1));
        assert_eq!(
            whole_seconds(Duration::from_millis(1001)),
            Duration::from_secs(2)
        );
        assert_eq!(whole_seconds(Duration::MAX).as_secs(), u64::MAX);
    }
}
