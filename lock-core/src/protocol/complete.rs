//! The call that ends an idempotent request: it stores the request's record and releases
//! its in-flight hold in one step, only while the hold is current (`complete` in
//! `library/complete.lua`).

use std::time::Duration;

use crate::protocol::fcall::{Arg, Call};
use crate::protocol::library::Function;
use crate::protocol::lock_calls::millis;
use crate::protocol::messages::Publish;
use crate::protocol::name::LockKeys;
use crate::protocol::replies::ReleaseReply;

/// What COMPLETE did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Completed {
    /// The record was stored and the hold released.
    Stored,
    /// The owner no longer held the lock with its token: nothing stored or released.
    NotCurrent,
}

impl redis::FromRedisValue for Completed {
    /// [`ReleaseReply::NotHeld`] when the hold was not current, else how it ended.
    fn from_redis_value(v: redis::Value) -> Result<Self, redis::ParsingError> {
        Ok(match ReleaseReply::from_redis_value(v)? {
            ReleaseReply::NotHeld => Self::NotCurrent,
            ReleaseReply::Released | ReleaseReply::StillHeld | ReleaseReply::HandedOver => {
                Self::Stored
            }
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
    let keys = hold.keys.in_key_order();
    debug_assert_eq!(
        keys.clone().count(),
        2,
        "no fence: records are not kept under Redlock"
    );
    let args = [
        Arg::Str(hold.owner),
        Arg::Int(hold.token),
        Arg::Int(millis(hold.lease)),
        Arg::Str(publish.command()),
        Arg::Bytes(value),
        Arg::Int(millis(retention)),
    ];
    let keys = keys.chain([("", record)]);
    // Without the migration guard, as before the library: a slot mid-migration answers
    // ASK or TRYAGAIN for the record's key before anything is written.
    Call::new(Function::Complete, false, keys, &args)
}
