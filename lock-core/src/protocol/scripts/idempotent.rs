//! The script that ends an idempotent request: it stores the request's record and releases
//! its in-flight hold in one step, only while the hold is current (`complete.lua`).

use std::sync::LazyLock;
use std::time::Duration;

use super::{millis, Arg, Call, LockScript, Publish};
use crate::protocol::kind::EXCLUSIVE;
use crate::protocol::name::LockKeys;

// `value` (bytes) and `retention_ms` follow the named ones; the script binds them itself.
static COMPLETE: LazyLock<LockScript> = LazyLock::new(|| {
    LockScript::new(
        include_str!("complete.lua"),
        &EXCLUSIVE,
        &["owner", "token", "lease_ms", "publish"],
    )
});

/// What COMPLETE did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Completed {
    /// The record was stored and the hold released.
    Stored,
    /// The owner no longer held the lock with its token: nothing stored or released.
    NotCurrent,
}

impl redis::FromRedisValue for Completed {
    fn from_redis_value(v: redis::Value) -> Result<Self, redis::ParsingError> {
        Ok(match i64::from_redis_value(v)? {
            0 => Self::NotCurrent,
            _ => Self::Stored,
        })
    }
}

/// The hold that ends: its lock's keys, owner, fencing token and lease.
pub(crate) struct Hold<'a> {
    pub(crate) keys: &'a LockKeys,
    pub(crate) owner: &'a str,
    pub(crate) token: u64,
    pub(crate) lease: Duration,
}

/// A COMPLETE call: stores `value` at `record` (a key in the lock's slot) for `retention`
/// and releases the hold, if the hold is current.
pub(crate) fn complete(
    hold: &Hold<'_>,
    record: &[u8],
    value: &[u8],
    retention: Duration,
    publish: Publish,
) -> Call<Completed> {
    let args = [
        Arg::Str(hold.owner),
        Arg::Int(hold.token),
        Arg::Int(millis(hold.lease)),
        Arg::Str(publish.command()),
    ];
    let keys = hold.keys.in_key_order();
    debug_assert_eq!(
        keys.clone().count(),
        2,
        "no fence: records are not kept under Redlock"
    );
    let bytes = keys.clone().map(|(p, k)| p.len() + k.len()).sum::<usize>()
        + record.len()
        + args.iter().map(Arg::room).sum::<usize>()
        + value.len()
        + 20;
    let mut call = Call::new(&COMPLETE.script, 3, args.len() + 2, bytes);
    for (prefix, rest) in keys {
        call.key(&[prefix.as_bytes(), rest]);
    }
    call.key(&[record]);
    for arg in &args {
        call.arg(arg);
    }
    call.cmd.arg(value);
    call.arg(&Arg::Int(millis(retention)));
    call
}
