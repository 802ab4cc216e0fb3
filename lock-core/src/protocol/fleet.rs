//! The calls of "run once across the fleet": a scheduled job's lingering release
//! ([`linger`]) and an election's announcement and snapshot ([`proclaim`], [`leader`]).
//! They take one exclusive lock's keys, like every call of a lock.

use std::time::Duration;

use redis::{FromRedisValue, ParsingError, Value};

use crate::protocol::fcall::{Arg, Call};
use crate::protocol::holder::HolderInfo;
use crate::protocol::library::Function;
use crate::protocol::lock_calls::on_lock;
use crate::protocol::messages::Publish;
use crate::protocol::name::LockKeys;

/// A LINGER call: `owner`'s lock expires in `remaining` instead of now (answers 1), or
/// 0 when the owner no longer holds it.
pub(crate) fn linger(keys: &LockKeys, owner: &str, remaining: Duration) -> Call<i64> {
    // Rounded up: the lock must last at least until the decided moment.
    let ms = u64::try_from(remaining.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
    on_lock(
        Function::Linger,
        keys,
        &[Arg::Str(owner), Arg::Int(ms.max(1))],
    )
}

/// A PROCLAIM call: answers 1 when `owner` leads and `value` ('' for none) is set.
pub(crate) fn proclaim(keys: &LockKeys, owner: &str, value: &str, publish: Publish) -> Call<i64> {
    let args = [
        Arg::Str(owner),
        Arg::Str(value),
        Arg::Str(publish.command()),
    ];
    on_lock(Function::Proclaim, keys, &args)
}

/// A LEADER call: a snapshot of the election's term.
pub(crate) fn leader(keys: &LockKeys) -> Call<LeaderReply> {
    on_lock(Function::Leader, keys, &[])
}

/// The answer to LEADER.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LeaderReply {
    /// The lock's PTTL: `-2` when nobody leads, `-1` without expiry.
    pub(crate) pttl: i64,
    pub(crate) token: u64,
    /// The leader's owner id; empty when nobody leads (or the holder left no record).
    pub(crate) owner: String,
    pub(crate) value: Option<String>,
    pub(crate) holder: Option<HolderInfo>,
}

impl FromRedisValue for LeaderReply {
    /// `{pttl, token, owner, has value, value, holder record fields…}`.
    fn from_redis_value(v: Value) -> Result<Self, ParsingError> {
        let mut items = Vec::<Value>::from_redis_value(v)?.into_iter();
        let mut next = || items.next().unwrap_or(Value::Nil);
        let pttl = i64::from_redis_value(next())?;
        let token = i64::from_redis_value(next())?.unsigned_abs();
        let owner = String::from_redis_value(next())?;
        let has_value = i64::from_redis_value(next())? == 1;
        let value = String::from_redis_value(next())?;
        let record: Vec<String> = items
            .map(|v| String::from_redis_value(v).unwrap_or_default())
            .collect();
        Ok(Self {
            pttl,
            token,
            owner,
            value: has_value.then_some(value),
            holder: HolderInfo::from_fields(&record),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::kind::mode::LockMode;

    #[test]
    fn lingering_rounds_the_lease_up() {
        let keys = LockKeys::for_key(b"p:k", LockMode::Exclusive, false);
        let sent = |d| {
            let call = linger(&keys, "u:1", d);
            String::from_utf8(call.words().last().unwrap().to_vec()).unwrap()
        };
        assert_eq!(sent(Duration::from_micros(1_500)), "2");
        assert_eq!(sent(Duration::from_millis(7)), "7");
        assert_eq!(sent(Duration::ZERO), "1");
    }
}
