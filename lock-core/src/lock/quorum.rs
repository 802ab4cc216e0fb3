//! Reading answers from several independent Redis servers (Redlock). With one server (or a
//! Cluster) the same code runs with one answer and a quorum of one.

use std::time::Duration;

use crate::error::LockError;

/// The majority of `nodes`: Redlock's `N/2 + 1`.
pub(crate) fn quorum(nodes: usize) -> usize {
    nodes / 2 + 1
}

/// What the nodes answered to one acquire call.
#[derive(Debug, Default)]
pub(crate) struct AcquireTally {
    /// Nodes where this owner now holds the lock.
    pub(crate) acquired: usize,
    /// The highest fencing token among them (see SAFETY.md for what it means under Redlock).
    pub(crate) token: u64,
    /// Nodes where another owner holds it, and the shortest TTL they reported.
    pub(crate) busy: usize,
    pub(crate) busy_ttl: Option<Duration>,
    /// A holder without TTL was seen.
    pub(crate) no_ttl: bool,
    pub(crate) first_error: Option<LockError>,
}

impl AcquireTally {
    /// Tallies `(acquired, token-or-pttl)` answers of the acquire script.
    pub(crate) fn of(answers: Vec<Result<(i64, i64), LockError>>) -> Self {
        let mut tally = Self::default();
        for answer in answers {
            match answer {
                Ok((1, token)) => {
                    tally.acquired += 1;
                    tally.token = tally.token.max(token.unsigned_abs());
                }
                Ok((_, pttl)) => {
                    tally.busy += 1;
                    match pttl {
                        -1 => tally.no_ttl = true,
                        // -2: the key vanished meanwhile: retry at once.
                        _ => {
                            let ttl = Duration::from_millis(pttl.max(0).unsigned_abs());
                            tally.busy_ttl = Some(tally.busy_ttl.map_or(ttl, |t| t.min(ttl)));
                        }
                    }
                }
                Err(error) => {
                    tally.first_error.get_or_insert(error);
                }
            }
        }
        tally
    }
}

/// What the nodes answered about one held lock at renewal: `Some(ttl)` confirmed, `None` lost.
/// Errors (`Err`) are neither: the local deadline decides if they persist.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Renewal {
    Confirmed(Duration),
    Lost,
    Unknown,
}

/// Settles one lock from each node's answer (`Ok(ttl ms)`, 0 = not held).
pub(crate) fn renewal(answers: impl IntoIterator<Item = Option<i64>>, nodes: usize) -> Renewal {
    let (mut confirmed, mut refused, mut min_ttl) = (0, 0, i64::MAX);
    for answer in answers {
        match answer {
            Some(ttl) if ttl > 0 => {
                confirmed += 1;
                min_ttl = min_ttl.min(ttl);
            }
            Some(_) => refused += 1,
            None => {}
        }
    }
    let needed = quorum(nodes);
    if confirmed >= needed {
        Renewal::Confirmed(Duration::from_millis(min_ttl.unsigned_abs()))
    } else if refused > nodes - needed {
        // A majority says the lock is gone: no quorum can confirm it any more.
        Renewal::Lost
    } else {
        Renewal::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_is_a_majority() {
        assert_eq!([1, 2, 3, 4, 5].map(quorum), [1, 2, 2, 3, 3]);
    }

    #[test]
    fn tally_takes_the_highest_token_and_shortest_ttl() {
        let t = AcquireTally::of(vec![Ok((1, 7)), Ok((1, 9)), Ok((0, 500)), Ok((0, 300))]);
        assert_eq!((t.acquired, t.token, t.busy), (2, 9, 2));
        assert_eq!(t.busy_ttl, Some(Duration::from_millis(300)));
    }

    #[test]
    fn renewal_needs_a_quorum() {
        assert!(
            matches!(renewal([Some(900), Some(800), None], 3), Renewal::Confirmed(d) if d == Duration::from_millis(800))
        );
        assert!(matches!(
            renewal([Some(900), Some(0), Some(0)], 3),
            Renewal::Lost
        ));
        assert!(matches!(
            renewal([Some(900), Some(0), None], 3),
            Renewal::Unknown
        ));
        assert!(matches!(renewal([Some(0)], 1), Renewal::Lost));
        assert!(matches!(renewal([None], 1), Renewal::Unknown));
    }
}
