//! The calls of one lock's operations: each builds its function's keys and arguments in one
//! place, in the order the function's first lines name them (see `library/`); the table
//! of functions picks the function of the lock's kind ([`Function::of`]).

use std::time::Duration;

use crate::protocol::fcall::{Arg, Call};
use crate::protocol::kind::mode::LockMode;
use crate::protocol::library::{Function, Operation};
use crate::protocol::messages::Publish;
use crate::protocol::name::LockKeys;
use crate::protocol::replies::{
    AcquireReply, InspectReply, MultiAcquireReply, ReleaseReply, RenewReply,
};

/// A call of `function` on the lock `keys` (its kind's keys, in their order).
pub(crate) fn on_lock<R: redis::FromRedisValue + Send>(
    function: Function,
    keys: &LockKeys,
    args: &[Arg<'_>],
) -> Call<R> {
    Call::new(function, keys.is_sharded(), keys.in_key_order(), args)
}

/// An ACQUIRE call of the keys' kind; `waiter_ttl` zero means "do not queue". `capacity`
/// is a semaphore's as its caller sees it.
pub(crate) fn acquire(
    keys: &LockKeys,
    owner: &str,
    lease: Duration,
    waiter_ttl: Duration,
    meta: &str,
    publish: Publish,
    capacity: u32,
) -> Call<AcquireReply> {
    let kind = keys.mode();
    // The kind's own: a read-write lock's side, a semaphore's capacity.
    let own = (kind.side().map(Arg::Str)).or_else(|| permits(kind, capacity));
    let (args, sent) = present([
        Some(Arg::Int(millis(lease))),
        Some(Arg::Str(owner)),
        Some(Arg::Str(meta)),
        Some(Arg::Int(millis(waiter_ttl))),
        Some(Arg::Str(publish.command())),
        own,
    ]);
    on_lock(Function::of(Operation::Acquire, kind), keys, &args[..sent])
}

/// A RELEASE call of the keys' kind: releases `owner`'s hold; with `queued_meta` (the
/// metadata its acquisition sent), also takes its entry out of the queue when it holds
/// nothing. `capacity` is as [`acquire`]'s: it spells a semaphore waiter's queue entry.
pub(crate) fn release(
    keys: &LockKeys,
    owner: &str,
    lease: Duration,
    publish: Publish,
    queued_meta: Option<&str>,
    capacity: u32,
) -> Call<ReleaseReply> {
    let kind = keys.mode();
    // Without `queued_meta` the function reads its last argument as nil.
    let (args, sent) = present([
        Some(Arg::Str(owner)),
        Some(Arg::Int(millis(lease))),
        Some(Arg::Str(publish.command())),
        permits(kind, capacity),
        queued_meta.map(Arg::Str),
    ]);
    on_lock(Function::of(Operation::Release, kind), keys, &args[..sent])
}

/// A TOUCH call of the keys' kind: writes `owner`'s hold again (for `WAIT`); answers its
/// TTL in ms, 0 when `owner` does not hold it.
pub(crate) fn touch(keys: &LockKeys, owner: &str, lease: Duration) -> Call<i64> {
    let kind = keys.mode();
    // A permit keeps the expiry it was granted.
    let lease = (kind != LockMode::Permit).then_some(Arg::Int(millis(lease)));
    let (args, sent) = present([Some(Arg::Str(owner)), lease]);
    on_lock(Function::of(Operation::Touch, kind), keys, &args[..sent])
}

/// A FENCE_FLOOR call (answers 1): the floor lasts `lease`. Redlock only, so exclusive.
pub(crate) fn fence_floor(keys: &LockKeys, token: u64, lease: Duration) -> Call<i64> {
    let args = [Arg::Int(token), Arg::Int(millis(lease))];
    on_lock(Function::FenceFloor, keys, &args)
}

/// A FORCE_RELEASE call of the keys' kind.
pub(crate) fn force_release(keys: &LockKeys, publish: Publish) -> Call<ReleaseReply> {
    let function = Function::of(Operation::ForceRelease, keys.mode());
    on_lock(function, keys, &[Arg::Str(publish.command())])
}

/// An INSPECT call; its waiters are counted in the queue of the keys' kind.
pub(crate) fn inspect(keys: &LockKeys) -> Call<InspectReply> {
    // The lock and its queue: a semaphore's records are found from the lock's key.
    Call::new(
        Function::Inspect,
        keys.is_sharded(),
        keys.in_key_order().take(2),
        &[],
    )
}

/// A RENEW call for `(keys, owner, lease)` of each lock (all of one slot): the lock keys,
/// then each lock's owner, lease and its kind's letter.
pub(crate) fn renew<'a, I>(locks: I) -> Call<RenewReply>
where
    I: IntoIterator<Item = (&'a LockKeys, &'a str, Duration)>,
    I::IntoIter: Clone,
{
    let locks = locks.into_iter();
    let sharded = locks
        .clone()
        .next()
        .is_some_and(|(keys, _, _)| keys.is_sharded());
    let keys = locks.clone().map(|(keys, _, _)| ("", keys.lock()));
    let args: Vec<Arg<'_>> = locks
        .flat_map(|(keys, owner, lease)| {
            let letter = keys.mode().letter();
            [Arg::Str(owner), Arg::Int(millis(lease)), Arg::Str(letter)]
        })
        .collect();
    Call::new(Function::Renew, sharded, keys, &args)
}

/// A MULTI_ACQUIRE call: every lock of `locks` (one slot, not Redlock) for `owner`, or none.
pub(crate) fn multi_acquire(
    locks: &[LockKeys],
    owner: &str,
    lease: Duration,
    meta: &str,
) -> Call<MultiAcquireReply> {
    let keys = locks.iter().flat_map(LockKeys::in_key_order);
    let args = [Arg::Int(millis(lease)), Arg::Str(owner), Arg::Str(meta)];
    Call::new(Function::MultiAcquire, false, keys, &args)
}

/// A semaphore's capacity as its caller sees it, which its functions take; the other kinds
/// have none.
fn permits(kind: LockMode, capacity: u32) -> Option<Arg<'static>> {
    (kind == LockMode::Permit).then_some(Arg::Int(u64::from(capacity)))
}

/// The arguments that are there, in their order, and how many: a call's arguments that
/// depend on its kind, without a `Vec`.
fn present<const N: usize>(args: [Option<Arg<'_>>; N]) -> ([Arg<'_>; N], usize) {
    let mut out = [Arg::Int(0); N];
    let mut sent = 0;
    for arg in args.into_iter().flatten() {
        out[sent] = arg;
        sent += 1;
    }
    (out, sent)
}

/// Milliseconds for Redis arguments (leases are validated to fit).
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::kind::mode::LockMode;
    use crate::protocol::library::CLUSTER_SUFFIX;

    /// A function's name as a call's word, and its Cluster variant's.
    fn word(function: Function) -> Vec<u8> {
        function.name().as_bytes().to_vec()
    }

    fn cluster_word(function: Function) -> Vec<u8> {
        format!("{}{CLUSTER_SUFFIX}", function.name()).into_bytes()
    }

    #[test]
    fn a_call_names_its_function_keys_and_arguments() {
        let keys = LockKeys::for_key(b"p:k", LockMode::Exclusive, true);
        let call = touch(&keys, "u:1", Duration::ZERO);
        assert_eq!(
            call.words(),
            [
                &b"FCALL"[..],
                &word(Function::Touch),
                b"3",
                b"p:k",
                b"distlock__wait:{p:k}",
                b"distlock__fence:{p:k}",
                b"u:1",
                b"0"
            ]
        );
        let inspect = inspect(&LockKeys::for_key(b"p:k", LockMode::Permit, false));
        assert_eq!(
            inspect.words(),
            [
                &b"FCALL_RO"[..],
                &word(Function::Inspect),
                b"2",
                b"p:k",
                b"distlock__semwait:{p:k}"
            ]
        );
    }

    /// One server, Sentinel and Redlock pay nothing for the migration guard.
    #[test]
    fn only_a_clusters_calls_check_for_a_migration() {
        let plain = LockKeys::for_key(b"p:k", LockMode::Exclusive, false);
        let sharded = plain.clone().sharded(true);
        let name = |call: &Call<i64>| call.words()[1].to_vec();
        let touch_of = |keys| touch(keys, "u:1", Duration::ZERO);
        assert_eq!(name(&touch_of(&plain)), word(Function::Touch));
        assert_eq!(name(&touch_of(&sharded)), cluster_word(Function::Touch));
        let renewed = |keys: &LockKeys| renew([(keys, "u:1", Duration::ZERO)]).words()[1].to_vec();
        assert_eq!(renewed(&plain), word(Function::Renew));
        assert_eq!(renewed(&sharded), cluster_word(Function::Renew));
    }

    /// A release that is not leaving the queue sends no metadata: nil in Lua.
    #[test]
    fn arguments_go_in_the_functions_order() {
        let keys = LockKeys::for_key(b"p:k", LockMode::Permit, false);
        let call = release(
            &keys,
            "u:1",
            Duration::from_millis(5),
            Publish::Plain,
            None,
            3,
        );
        assert_eq!(call.words()[6..], [&b"u:1"[..], b"5", b"publish", b"3"]);
        let rw = LockKeys::for_key(b"p:k", LockMode::Read, false);
        let call = acquire(
            &rw,
            "u:2",
            Duration::ZERO,
            Duration::ZERO,
            "",
            Publish::Plain,
            1,
        );
        assert_eq!(call.words().last(), Some(&&b"read"[..]));
        assert_eq!(call.words()[1], word(Function::RwAcquire));
    }
}
