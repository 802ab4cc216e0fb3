//! `TIME` on the node's virtual clock.

/// What `TIME` has answered within the current millisecond of the node's clock.
///
/// The model's clock counts milliseconds; `TIME` answers microseconds. The library takes
/// fencing tokens from `TIME` (µs) and relies on real time moving on between two grants on
/// one node, so that their tokens strictly increase. The model keeps that promise without
/// inventing time: the n-th `TIME` within one millisecond of the node's clock answers
/// `ms × 1000 + n` (n from 0), and the count starts again whenever the clock reads another
/// millisecond — later or, after a clock jump back, earlier, where tokens may then repeat
/// as they would on a real server. More than 1000 `TIME`s in one millisecond would
/// overtake the next millisecond: the model refuses that run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct TimeCursor {
    ms: i64,
    issued: u32,
}

impl TimeCursor {
    /// The next `TIME` at `clock_ms`, in µs; `None` past 1000 in one millisecond.
    pub(crate) fn next(&mut self, clock_ms: i64) -> Option<i64> {
        if clock_ms != self.ms {
            self.ms = clock_ms;
            self.issued = 0;
        }
        if self.issued >= 1000 {
            return None;
        }
        let micros = clock_ms * 1000 + i64::from(self.issued);
        self.issued += 1;
        Some(micros)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_increases_within_a_millisecond_and_follows_the_clock_back() {
        let mut cursor = TimeCursor::default();
        assert_eq!(cursor.next(5), Some(5000));
        assert_eq!(cursor.next(5), Some(5001));
        assert_eq!(cursor.next(6), Some(6000));
        assert_eq!(
            cursor.next(5),
            Some(5000),
            "a clock stepped back repeats itself"
        );
        for _ in 1..1000 {
            cursor.next(5).unwrap();
        }
        assert_eq!(cursor.next(5), None);
    }
}
