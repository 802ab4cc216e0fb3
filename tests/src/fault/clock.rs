//! Timestamps that processes of one machine can compare.
//!
//! `std::time::Instant` (and Tokio's) reads `CLOCK_MONOTONIC` on Linux but cannot be sent
//! to another process; this reads the same clock as plain nanoseconds. The clock keeps
//! running while a process is SIGSTOPped, so a paused holder's lease runs out on it too.

use nix::time::{clock_gettime, ClockId};

/// Nanoseconds on `CLOCK_MONOTONIC`: comparable between processes of this machine, and with
/// the deadlines `lock-core` keeps on `Instant`.
pub fn monotonic_ns() -> u64 {
    let now = clock_gettime(ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC is always readable");
    let secs = u64::try_from(now.tv_sec()).expect("monotonic seconds are not negative");
    let nanos = u64::try_from(now.tv_nsec()).expect("nanoseconds are not negative");
    secs * 1_000_000_000 + nanos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advances_with_instant() {
        let (a, start) = (monotonic_ns(), std::time::Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(5));
        let (b, took) = (monotonic_ns(), start.elapsed());
        assert!(b > a);
        // Same clock: the two measures of one interval agree to well under a millisecond.
        let diff = (b - a).abs_diff(u64::try_from(took.as_nanos()).unwrap());
        assert!(diff < 1_000_000, "{diff} ns apart");
    }
}
