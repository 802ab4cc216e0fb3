//! [`ZSet`]: a sorted set, ordered as Redis orders one: by score, then by member bytes.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

/// A score: a non-NaN double, `-0` normalised to `0` (a listpack, the encoding of every
/// sorted set up to 128 members, stores `-0` as the integer 0: real servers reply `0`).
/// Equal and hashed by its bits, ordered by value.
#[derive(Clone, Copy, Debug)]
pub struct Score(f64);

impl Score {
    /// The score `value`, or `None` for NaN (Redis stores no NaN score).
    pub fn new(value: f64) -> Option<Self> {
        // `-0.0 + 0.0` is `0.0`: the sign goes, every other value stays.
        (!value.is_nan()).then_some(Self(value + 0.0))
    }

    /// Its value.
    pub fn value(self) -> f64 {
        self.0
    }
}

impl PartialEq for Score {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Score {}

impl Hash for Score {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

/// One member in score order: (score value, member), as `zslInsert` compares them, then the
/// score's bits (only to keep `Ord` consistent with `Eq`; a member has one score).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Ranked {
    score: Score,
    member: Vec<u8>,
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .0
            .partial_cmp(&other.score.0)
            .expect("scores are never NaN")
            .then_with(|| self.member.cmp(&other.member))
            .then_with(|| self.score.0.to_bits().cmp(&other.score.0.to_bits()))
    }
}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A sorted set. Equality and hashing read the members and their scores only (the order is
/// derived from them).
#[derive(Clone, Debug, Default)]
pub struct ZSet {
    scores: BTreeMap<Vec<u8>, Score>,
    ranked: BTreeSet<Ranked>,
}

impl PartialEq for ZSet {
    fn eq(&self, other: &Self) -> bool {
        self.scores == other.scores
    }
}

impl Eq for ZSet {}

impl Hash for ZSet {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.scores.hash(state);
    }
}

impl ZSet {
    /// How many members it has.
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// True when it has no member (Redis deletes such a key).
    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).map(|s| s.0)
    }

    /// The members and their scores, in Redis' order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], f64)> + ExactSizeIterator {
        self.ranked.iter().map(|r| (r.member.as_slice(), r.score.0))
    }

    /// Sets `member`'s score (adding it when new).
    pub(crate) fn insert(&mut self, member: &[u8], score: Score) {
        if let Some(old) = self.scores.insert(member.to_vec(), score) {
            self.ranked.remove(&Ranked {
                score: old,
                member: member.to_vec(),
            });
        }
        self.ranked.insert(Ranked {
            score,
            member: member.to_vec(),
        });
    }

    /// Removes `member`; true when it was there.
    pub(crate) fn remove(&mut self, member: &[u8]) -> bool {
        match self.scores.remove(member) {
            Some(score) => {
                self.ranked.remove(&Ranked {
                    score,
                    member: member.to_vec(),
                });
                true
            }
            None => false,
        }
    }

    /// Removes and returns the first member in order.
    pub(crate) fn pop_first(&mut self) -> Option<(Vec<u8>, f64)> {
        let first = self.ranked.pop_first()?;
        self.scores.remove(&first.member);
        Some((first.member, first.score.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_score_then_member_and_equality_ignores_history() {
        let mut a = ZSet::default();
        a.insert(b"b", Score::new(1.0).unwrap());
        a.insert(b"a", Score::new(1.0).unwrap());
        a.insert(b"z", Score::new(0.5).unwrap());
        a.insert(b"n", Score::new(-0.0).unwrap());
        a.insert(b"m", Score::new(0.0).unwrap());
        let order: Vec<_> = a.iter().map(|(m, _)| m.to_vec()).collect();
        assert_eq!(order, [&b"m"[..], b"n", b"z", b"a", b"b"]);
        assert!(
            a.score(b"n").unwrap().is_sign_positive(),
            "-0 is stored as 0"
        );
        let mut b = ZSet::default();
        b.insert(b"a", Score::new(7.0).unwrap());
        for (m, s) in a.iter() {
            b.insert(m, Score::new(s).unwrap());
        }
        assert_eq!(a, b);
        b.insert(b"n", Score::new(3.0).unwrap());
        assert_ne!(a, b);
    }
}
