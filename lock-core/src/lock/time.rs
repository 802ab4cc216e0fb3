//! Time arithmetic on the local monotonic clock. Deadlines saturate instead of overflowing:
//! a wait or hold limit can be `Duration::MAX`, and a TTL comes from Redis, where anyone may
//! have set a key's expiry to centuries.

use std::time::Duration;

use tokio::time::Instant;

/// As good as never: beyond it, a deadline is not worth keeping exact (tokio's own "far
/// future" is 30 years too).
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// `from + after`, capped at 30 years from `from`.
pub(crate) fn later(from: Instant, after: Duration) -> Instant {
    from + after.min(FAR_FUTURE)
}

/// The safety margin subtracted from a lease before it is assumed over: clock drift between
/// this process and Redis (1 %) plus scheduling slack (2 ms), as Redlock prescribes.
pub(crate) fn drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_is_one_percent_plus_two_ms() {
        assert_eq!(drift(Duration::from_secs(10)), Duration::from_millis(102));
        assert_eq!(
            drift(Duration::from_millis(10)),
            Duration::from_micros(2_100)
        );
    }

    #[test]
    fn huge_durations_saturate() {
        let now = Instant::now();
        assert_eq!(later(now, Duration::MAX), now + FAR_FUTURE);
        assert_eq!(
            later(now, Duration::from_millis(1500)),
            now + Duration::from_millis(1500)
        );
    }
}
