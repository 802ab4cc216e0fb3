//! Reading answers from several independent Redis servers (Redlock). With one server (or a
//! Cluster) the same code runs with one answer and a quorum of one.

use std::time::Duration;

use crate::error::LockError;
use crate::protocol::holder::HolderInfo;
use crate::protocol::replies::AcquireReply;

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
    /// The highest holder's token a busy node reported.
    pub(crate) fence: u64,
    /// The first holder record a busy node reported.
    pub(crate) holder: Option<Box<HolderInfo>>,
    pub(crate) first_error: Option<LockError>,
}

impl AcquireTally {
    /// Tallies the answers of the acquire function.
    pub(crate) fn of(answers: Vec<Result<AcquireReply, LockError>>) -> Self {
        let mut tally = Self::default();
        for answer in answers {
            match answer {
                Ok(AcquireReply::Acquired { token }) => {
                    tally.acquired += 1;
                    tally.token = tally.token.max(token);
                }
                Ok(AcquireReply::Busy {
                    pttl,
                    fence,
                    holder,
                }) => {
                    tally.busy += 1;
                    tally.fence = tally.fence.max(fence);
                    if tally.holder.is_none() {
                        tally.holder = holder.map(Box::new);
                    }
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
        let busy = |pttl, fence| {
            Ok(AcquireReply::Busy {
                pttl,
                fence,
                holder: None,
            })
        };
        let acquired = |token| Ok(AcquireReply::Acquired { token });
        let t = AcquireTally::of(vec![acquired(7), acquired(9), busy(500, 4), busy(300, 6)]);
        assert_eq!((t.acquired, t.token, t.busy, t.fence), (2, 9, 2, 6));
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
