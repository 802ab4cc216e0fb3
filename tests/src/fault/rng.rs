//! A small seeded generator (SplitMix64) for reproducible random faults: a failing run
//! prints its seed, and the same seed replays the same fault schedule.

use std::ops::Range;
use std::time::Duration;

/// SplitMix64: tiny, fast and good enough to pick faults; not for cryptography.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator that always yields the same sequence for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// A seed from `$var` when set (to replay a run), else from the clock.
    ///
    /// # Panics
    /// When `$var` is set but is not a number.
    pub fn seed_from_env(var: &str) -> u64 {
        match std::env::var(var) {
            Ok(text) => text
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("${var} must be a number, got {text:?}")),
            Err(_) => u64::try_from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_nanos()
                    % u128::from(u64::MAX),
            )
            .unwrap_or_default(),
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `range` (which must not be empty).
    pub fn below(&mut self, range: Range<u64>) -> u64 {
        assert!(!range.is_empty(), "empty range {range:?}");
        range.start + self.next_u64() % (range.end - range.start)
    }

    /// An index into a collection of `len` items.
    pub fn index(&mut self, len: usize) -> usize {
        usize::try_from(self.below(0..len as u64)).expect("an index fits in usize")
    }

    /// A duration between `low` and `high` (inclusive of `low`), at millisecond resolution.
    pub fn millis(&mut self, low: Duration, high: Duration) -> Duration {
        let (low, high) = (low.as_millis() as u64, high.as_millis() as u64);
        Duration::from_millis(self.below(low..high.max(low + 1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(Rng::new(8).next_u64(), xs[0]);
    }

    #[test]
    fn values_stay_in_range() {
        let mut rng = Rng::new(1);
        for _ in 0..1000 {
            assert!((10..20).contains(&rng.below(10..20)));
            assert!(rng.index(3) < 3);
            let d = rng.millis(Duration::from_millis(5), Duration::from_millis(9));
            assert!(d >= Duration::from_millis(5) && d < Duration::from_millis(9));
        }
    }
}
