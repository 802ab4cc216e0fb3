//! What each function answers, read once, here: the rest of the crate sees these types and
//! never indexes an answer by position. The shapes are stated above each function in its
//! file under `library/`.
//!
//! Every function that ends a hold answers one of four codes, one meaning each across
//! functions (constants in `library/common.lua`, [`ReleaseReply`] here; the library's tests
//! compare the two):
//!
//! | code | Lua | [`ReleaseReply`] | meaning |
//! | --- | --- | --- | --- |
//! | 0 | `NOT_HELD` | `NotHeld` | the caller held nothing — or, for COMPLETE, not with its token; for a FORCE_RELEASE, there was no lock. Nothing was released. |
//! | 1 | `RELEASED` | `Released` | the hold ended and its release was published (or, for a read-write lock, other holds remain) |
//! | 2 | `STILL_HELD` | `StillHeld` | a reentrant hold remains (Redisson clients) |
//! | 3 | `HANDED_OVER` | `HandedOver` | the hold ended and the name was handed to waiters |
//!
//! RELEASE, RW_RELEASE, SEM_RELEASE, the three FORCE_RELEASEs and COMPLETE answer them
//! (a semaphore's and the force releases never `StillHeld`; the shared kinds' force
//! releases never `HandedOver`: their waiters retry at once).

use std::time::Duration;

use redis::{FromRedisValue, ParsingError, Value};

use crate::protocol::holder::HolderInfo;
use crate::protocol::kind::mode::LockMode;

/// The answer to ACQUIRE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// This owner holds the lock, with this fencing token.
    Acquired { token: u64 },
    /// Another owner holds it (or it was promised to an earlier waiter).
    Busy {
        /// The lock's PTTL: `-1` without expiry, `-2` when it vanished meanwhile.
        pttl: i64,
        /// The holder's fencing token (0: unknown, e.g. a Redisson holder): a grant with a
        /// token not above it was superseded.
        fence: u64,
        /// The holder's record, if it has one.
        holder: Option<HolderInfo>,
    },
}

impl FromRedisValue for AcquireReply {
    /// `{1, token}` or `{0, pttl, a holder's token or 0, a holder's record or nil}`: the
    /// fence is the greater of the token and the record's.
    fn from_redis_value(v: Value) -> Result<Self, ParsingError> {
        let mut items = Vec::<Value>::from_redis_value(v)?.into_iter();
        let mut int = || i64::from_redis_value(items.next().unwrap_or(Value::Nil));
        let (status, value) = (int()?, int()?);
        if status == 1 {
            return Ok(Self::Acquired {
                token: value.unsigned_abs(),
            });
        }
        let token = int()?.unsigned_abs();
        let record = Option::<String>::from_redis_value(items.next().unwrap_or(Value::Nil))
            .ok()
            .flatten()
            .unwrap_or_default();
        let (recorded, holder) = HolderInfo::from_record(&record);
        Ok(Self::Busy {
            pttl: value,
            fence: token.max(recorded),
            holder,
        })
    }
}

/// The answer to MULTI_ACQUIRE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MultiAcquireReply {
    /// Every lock was taken, with this fencing token.
    Acquired { token: u64 },
    /// Lock `index` (from 0) was held or had waiters: nothing was taken.
    Busy { index: usize },
}

impl FromRedisValue for MultiAcquireReply {
    /// `{1, token}` or `{0, i}` (i from 1).
    fn from_redis_value(v: Value) -> Result<Self, ParsingError> {
        let (status, value): (i64, u64) = FromRedisValue::from_redis_value(v)?;
        Ok(match status {
            1 => Self::Acquired { token: value },
            _ => Self::Busy {
                index: usize::try_from(value.saturating_sub(1)).unwrap_or(usize::MAX),
            },
        })
    }
}

/// The answer of a function that ends a hold (the codes are in the module's docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReleaseReply {
    /// The owner held nothing (it only left the queue), or not with its token; no lock to
    /// force.
    NotHeld = 0,
    /// The hold ended and the release was published.
    Released = 1,
    /// A reentrant hold remains (Redisson clients).
    StillHeld = 2,
    /// The name was handed to the next waiters.
    HandedOver = 3,
}

impl ReleaseReply {
    /// Every answer, in code order.
    pub(crate) const ALL: [Self; 4] = [
        Self::NotHeld,
        Self::Released,
        Self::StillHeld,
        Self::HandedOver,
    ];

    /// True when the owner held the lock (for a forced release: when there was a lock).
    pub(crate) fn was_held(self) -> bool {
        self != Self::NotHeld
    }

    /// Its code, as the library answers it.
    pub(crate) fn code(self) -> i64 {
        self as i64
    }
}

impl FromRedisValue for ReleaseReply {
    fn from_redis_value(v: Value) -> Result<Self, ParsingError> {
        let code = i64::from_redis_value(v)?;
        (Self::ALL.into_iter())
            .find(|reply| reply.code() == code)
            .ok_or_else(|| format!("a release answered {code}").into())
    }
}

/// The answer to INSPECT: one node's snapshot of one lock. Lenient: the key may be any
/// hash of the database (a listing with an empty key prefix), so an unreadable part reads as
/// "nothing there".
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InspectReply {
    /// The key is a lock of some kind (a hash, or a semaphore's ZSET).
    pub(crate) is_lock: bool,
    /// The holding owner and its hold count (the hash's first owner field; the function
    /// leaves the holder record out).
    pub(crate) owner: Option<(String, u64)>,
    /// The lock's remaining lease, when held and expiring.
    pub(crate) remaining_ttl: Option<Duration>,
    /// The holder's fencing token (0: none recorded).
    pub(crate) fencing_token: u64,
    /// Live waiters.
    pub(crate) waiters: usize,
    /// The holder's record, if it has one.
    pub(crate) holder: Option<HolderInfo>,
    /// What the key is: `None` for a lock, else a read-write lock's mode or a semaphore.
    pub(crate) mode: Option<LockMode>,
    /// Every holder of a read-write lock or a semaphore: owner, token, TTL, record.
    pub(crate) holdings: Vec<HoldingReply>,
}

/// One holder of a read-write lock or a semaphore, as INSPECT lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HoldingReply {
    pub(crate) owner: String,
    pub(crate) token: u64,
    pub(crate) ttl: Option<Duration>,
    pub(crate) holder: Option<HolderInfo>,
}

impl FromRedisValue for InspectReply {
    /// `{type, owners and counts, pttl, token, waiters, holder record fields, kind,
    /// holdings}`.
    fn from_redis_value(v: Value) -> Result<Self, ParsingError> {
        let mut items = Vec::<Value>::from_redis_value(v)?.into_iter();
        let mut next = || items.next().unwrap_or(Value::Nil);
        let kind = String::from_redis_value(next()).unwrap_or_default();
        let fields = Vec::<(String, u64)>::from_redis_value(next()).unwrap_or_default();
        let pttl = i64::from_redis_value(next()).unwrap_or(-2);
        let fencing_token = u64::from_redis_value(next()).unwrap_or(0);
        let waiters = usize::from_redis_value(next()).unwrap_or(0);
        let record = Vec::<String>::from_redis_value(next()).unwrap_or_default();
        // '' is a plain lock (or no lock): told apart by its owner below.
        let named = String::from_redis_value(next()).unwrap_or_default();
        let mode = LockMode::from_inspected(&named);
        let flat = Vec::<Value>::from_redis_value(next()).unwrap_or_default();
        let owner = fields.into_iter().next();
        Ok(Self {
            is_lock: kind == "hash" || mode.is_some_and(|m| m.redis_type() == kind),
            remaining_ttl: (owner.is_some() && pttl >= 0)
                .then(|| Duration::from_millis(pttl.unsigned_abs())),
            owner,
            fencing_token,
            waiters,
            holder: HolderInfo::from_fields(&record),
            mode,
            holdings: holdings(flat),
        })
    }
}

/// Reads INSPECT's flattened holders: owner, token, TTL ms, n, then n record fields.
fn holdings(flat: Vec<Value>) -> Vec<HoldingReply> {
    let mut items = flat.into_iter();
    let mut out = Vec::new();
    while let Some(owner) = items.next() {
        let mut int = || i64::from_redis_value(items.next().unwrap_or(Value::Nil)).unwrap_or(0);
        let (token, ttl, n) = (int(), int(), int());
        let fields: Vec<String> = (&mut items)
            .take(usize::try_from(n).unwrap_or(0))
            .map(|v| String::from_redis_value(v).unwrap_or_default())
            .collect();
        out.push(HoldingReply {
            owner: String::from_redis_value(owner).unwrap_or_default(),
            token: token.unsigned_abs(),
            ttl: (ttl >= 0).then(|| Duration::from_millis(ttl.unsigned_abs())),
            holder: HolderInfo::from_fields(&fields),
        });
    }
    out
}

/// The answer to RENEW: per lock of the call, in call order, its TTL in ms (0: lost).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RenewReply(Vec<i64>);

impl RenewReply {
    /// The answer for the `i`-th lock of the call (`None` if the answer is short).
    pub(crate) fn ttl_ms(&self, i: usize) -> Option<i64> {
        self.0.get(i).copied()
    }
}

impl FromRedisValue for RenewReply {
    fn from_redis_value(v: Value) -> Result<Self, ParsingError> {
        Vec::from_redis_value(v).map(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn acquire_reads_both_shapes() {
        let got = AcquireReply::from_redis_value(Value::Array(vec![Value::Int(1), Value::Int(7)]));
        assert_eq!(got.unwrap(), AcquireReply::Acquired { token: 7 });
        let record = "1714533129456789\u{1f}u:1\u{1f}billing\u{1f}web-3\u{1f}4242\u{1f}";
        let busy = vec![Value::Int(0), Value::Int(900), Value::Int(0), bulk(record)];
        let Ok(AcquireReply::Busy {
            pttl,
            fence,
            holder,
        }) = AcquireReply::from_redis_value(Value::Array(busy))
        else {
            panic!("a busy answer")
        };
        assert_eq!((pttl, fence), (900, 1_714_533_129_456_789));
        assert_eq!(holder.unwrap().service(), "billing");
        // A Redisson holder: no record; a read-write lock's highest token beside a record.
        let bare = vec![Value::Int(0), Value::Int(-1), Value::Int(3), Value::Nil];
        let got = AcquireReply::from_redis_value(Value::Array(bare)).unwrap();
        assert!(matches!(
            got,
            AcquireReply::Busy {
                pttl: -1,
                fence: 3,
                holder: None
            }
        ));
        let higher = vec![
            Value::Int(0),
            Value::Int(5),
            Value::Int(9),
            bulk("7\u{1f}u:2"),
        ];
        let got = AcquireReply::from_redis_value(Value::Array(higher)).unwrap();
        assert!(matches!(got, AcquireReply::Busy { fence: 9, .. }));
        assert!(AcquireReply::from_redis_value(Value::Int(1)).is_err());
    }

    #[test]
    fn release_outcomes_are_numbered_as_in_the_library() {
        let read = |n| ReleaseReply::from_redis_value(Value::Int(n));
        assert_eq!(read(0).unwrap(), ReleaseReply::NotHeld);
        assert_eq!(read(3).unwrap(), ReleaseReply::HandedOver);
        assert!(read(2).unwrap().was_held() && !read(0).unwrap().was_held());
        assert!(read(4).is_err());
    }

    #[test]
    fn inspect_is_lenient_about_foreign_hashes() {
        let reply = Value::Array(vec![
            Value::SimpleString("hash".into()),
            // A hash that is no lock: its values are no counts.
            Value::Array(vec![bulk("name"), bulk("alice")]),
            Value::Int(-1),
            Value::Int(0),
            Value::Int(0),
            Value::Array(vec![]),
        ]);
        let state = InspectReply::from_redis_value(reply).unwrap();
        assert!(state.is_lock && state.owner.is_none() && state.remaining_ttl.is_none());
        let held = Value::Array(vec![
            Value::SimpleString("hash".into()),
            Value::Array(vec![bulk("u:1"), bulk("1")]),
            Value::Int(800),
            Value::Int(5),
            Value::Int(2),
            Value::Array(vec![]),
        ]);
        let state = InspectReply::from_redis_value(held).unwrap();
        assert_eq!(state.owner, Some(("u:1".to_owned(), 1)));
        assert_eq!(state.remaining_ttl, Some(Duration::from_millis(800)));
        assert_eq!((state.fencing_token, state.waiters), (5, 2));
    }
}
