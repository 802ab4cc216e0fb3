//! The scripts of "run once across the fleet": a scheduled job's lingering release
//! ([`linger`]) and an election's announcement and snapshot ([`proclaim`], [`leader`]).
//! They take one exclusive lock's keys in the one order, like every other script of a lock.

use std::sync::LazyLock;
use std::time::Duration;

use redis::{FromRedisValue, ParsingError, Value};

use super::{Args, Call, LockScript, Publish};
use crate::protocol::holder::{HolderInfo, HOLDER_FIELD};
use crate::protocol::kind::EXCLUSIVE;
use crate::protocol::name::LockKeys;

/// The field of an election's lock hash that holds the leader's proclaimed value. It starts
/// with `HOLDER_FIELD:` so that INSPECT files it with the records, not with the owners.
pub(crate) const VALUE_FIELD: &str = "distlock:holder:value";

/// What a new leader (or a new value) publishes on the lock's channel. Waiters read it as a
/// release (they retry once). On Redisson's channel every payload must be a number its
/// `LongCodec` decodes: Redisson acts on 0 (unlock) and 1 (read unlock) and ignores others.
pub(crate) const LEADER_MESSAGE: &str = "2";

/// The constants these scripts add to the generated header.
fn with_constants(body: &str) -> String {
    debug_assert!(VALUE_FIELD.starts_with(HOLDER_FIELD));
    format!(
        "local VALUE_FIELD = '{VALUE_FIELD}'\nlocal LEADER_MESSAGE = '{LEADER_MESSAGE}'\n{body}"
    )
}

static LINGER: LazyLock<LockScript> = LazyLock::new(|| {
    LockScript::new(
        include_str!("linger.lua"),
        &EXCLUSIVE,
        &["owner", "remaining_ms"],
    )
});
static PROCLAIM: LazyLock<LockScript> = LazyLock::new(|| {
    LockScript::new(
        &with_constants(include_str!("proclaim.lua")),
        &EXCLUSIVE,
        &["owner", "value", "publish"],
    )
});
static LEADER: LazyLock<LockScript> =
    LazyLock::new(|| LockScript::new(&with_constants(include_str!("leader.lua")), &EXCLUSIVE, &[]));

/// A LINGER call: `owner`'s lock expires in `remaining` instead of now (answers 1), or
/// 0 when the owner no longer holds it.
pub(crate) fn linger(keys: &LockKeys, owner: &str, remaining: Duration) -> Call<i64> {
    // Rounded up: the lock must last at least until the decided moment.
    let ms = u64::try_from(remaining.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
    let args = Args {
        owner: Some(owner),
        remaining_ms: Some(ms.max(1)),
        ..Args::default()
    };
    LINGER.call(keys, &args)
}

/// A PROCLAIM call: answers 1 when `owner` leads and `value` ('' for none) is set.
pub(crate) fn proclaim(keys: &LockKeys, owner: &str, value: &str, publish: Publish) -> Call<i64> {
    let args = Args {
        owner: Some(owner),
        value: Some(value),
        publish: Some(publish.command()),
        ..Args::default()
    };
    PROCLAIM.call(keys, &args)
}

/// A LEADER call: a snapshot of the election's term.
pub(crate) fn leader(keys: &LockKeys) -> Call<LeaderReply> {
    LEADER.call(keys, &Args::default())
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

    #[test]
    fn fleet_scripts_use_named_arguments_and_generated_names() {
        for (name, body) in [
            ("linger", include_str!("linger.lua")),
            ("proclaim", include_str!("proclaim.lua")),
            ("leader", include_str!("leader.lua")),
        ] {
            for line in body.lines().filter(|l| !l.trim_start().starts_with("--")) {
                assert!(!line.contains("ARGV["), "{name}.lua: {line}");
                assert!(!line.contains("KEYS["), "{name}.lua: {line}");
                assert!(
                    !line.contains("distlock:"),
                    "{name}.lua spells a name: {line}"
                );
            }
        }
    }

    #[test]
    fn the_leader_message_is_a_number_redisson_ignores() {
        let decoded: i64 = LEADER_MESSAGE
            .parse()
            .expect("a 64-bit integer, as LongCodec reads");
        assert!(
            decoded != 0 && decoded != 1,
            "0 and 1 mean unlocks to Redisson"
        );
    }

    #[test]
    fn lingering_rounds_the_lease_up() {
        let keys = LockKeys::for_key(b"p:k", &EXCLUSIVE, false);
        let sent = |d| {
            let call = linger(&keys, "u:1", d);
            let last = call.cmd.args_iter().last().map(|a| match a {
                redis::Arg::Simple(bytes) => bytes.to_vec(),
                _ => Vec::new(),
            });
            String::from_utf8(last.unwrap()).unwrap()
        };
        assert_eq!(sent(Duration::from_micros(1_500)), "2");
        assert_eq!(sent(Duration::from_millis(7)), "7");
        assert_eq!(sent(Duration::ZERO), "1");
    }
}
