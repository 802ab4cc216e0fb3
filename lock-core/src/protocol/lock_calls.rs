//! The calls of one lock's operations: each builds its function's keys and arguments in one
//! place, in the order the function's first lines name them (see `library/`), and picks
//! the function of the lock's kind.

use std::time::Duration;

use crate::protocol::fcall::{Arg, Call};
use crate::protocol::kind::mode::LockMode;
use crate::protocol::library::Function;
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
    let common = [
        Arg::Int(millis(lease)),
        Arg::Str(owner),
        Arg::Str(meta),
        Arg::Int(millis(waiter_ttl)),
        Arg::Str(publish.command()),
    ];
    let [lease, owner, meta, ttl, publish] = common;
    match keys.mode() {
        LockMode::Exclusive => on_lock(Function::Acquire, keys, &common),
        LockMode::Read => on_lock(
            Function::RwAcquire,
            keys,
            &[lease, owner, meta, ttl, publish, Arg::Str("read")],
        ),
        LockMode::Write => on_lock(
            Function::RwAcquire,
            keys,
            &[lease, owner, meta, ttl, publish, Arg::Str("write")],
        ),
        LockMode::Permit => on_lock(
            Function::SemAcquire,
            keys,
            &[
                lease,
                owner,
                meta,
                ttl,
                publish,
                Arg::Int(u64::from(capacity)),
            ],
        ),
    }
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
    let (owner, lease, publish) = (
        Arg::Str(owner),
        Arg::Int(millis(lease)),
        Arg::Str(publish.command()),
    );
    // Without `queued_meta` the function reads its last argument as nil.
    let meta = Arg::Str(queued_meta.unwrap_or_default());
    let sent = |all: usize| if queued_meta.is_some() { all } else { all - 1 };
    match keys.mode() {
        LockMode::Exclusive => {
            let args = [owner, lease, publish, meta];
            on_lock(Function::Release, keys, &args[..sent(4)])
        }
        LockMode::Read | LockMode::Write => {
            let args = [owner, lease, publish, meta];
            on_lock(Function::RwRelease, keys, &args[..sent(4)])
        }
        LockMode::Permit => {
            let args = [owner, lease, publish, Arg::Int(u64::from(capacity)), meta];
            on_lock(Function::SemRelease, keys, &args[..sent(5)])
        }
    }
}

/// A TOUCH call of the keys' kind: writes `owner`'s hold again (for `WAIT`); answers its
/// TTL in ms, 0 when `owner` does not hold it.
pub(crate) fn touch(keys: &LockKeys, owner: &str, lease: Duration) -> Call<i64> {
    let (owner, lease) = (Arg::Str(owner), Arg::Int(millis(lease)));
    match keys.mode() {
        LockMode::Exclusive => on_lock(Function::Touch, keys, &[owner, lease]),
        LockMode::Read | LockMode::Write => on_lock(Function::RwTouch, keys, &[owner, lease]),
        // A permit keeps the expiry it was granted.
        LockMode::Permit => on_lock(Function::SemTouch, keys, &[owner]),
    }
}

/// A FENCE_FLOOR call (answers 1): the floor lasts `lease`. Redlock only, so exclusive.
pub(crate) fn fence_floor(keys: &LockKeys, token: u64, lease: Duration) -> Call<i64> {
    let args = [Arg::Int(token), Arg::Int(millis(lease))];
    on_lock(Function::FenceFloor, keys, &args)
}

/// A FORCE_RELEASE call of the keys' kind.
pub(crate) fn force_release(keys: &LockKeys, publish: Publish) -> Call<ReleaseReply> {
    let function = match keys.mode() {
        LockMode::Exclusive => Function::ForceRelease,
        LockMode::Read | LockMode::Write => Function::RwForceRelease,
        LockMode::Permit => Function::SemForceRelease,
    };
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

/// Milliseconds for Redis arguments (leases are validated to fit).
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::kind::mode::LockMode;

    #[test]
    fn a_call_names_its_function_keys_and_arguments() {
        let keys = LockKeys::for_key(b"p:k", LockMode::Exclusive, true);
        let call = touch(&keys, "u:1", Duration::ZERO);
        assert_eq!(
            call.words(),
            [
                &b"FCALL"[..],
                b"distlock_4_touch",
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
                b"distlock_4_inspect",
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
        assert_eq!(
            name(&touch(&plain, "u:1", Duration::ZERO)),
            b"distlock_4_touch"
        );
        assert_eq!(
            name(&touch(&sharded, "u:1", Duration::ZERO)),
            b"distlock_4_touch_cluster"
        );
        let renewed = |keys: &LockKeys| renew([(keys, "u:1", Duration::ZERO)]).words()[1].to_vec();
        assert_eq!(renewed(&plain), b"distlock_4_renew");
        assert_eq!(renewed(&sharded), b"distlock_4_renew_cluster");
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
        assert_eq!(call.words()[1], b"distlock_4_rw_acquire");
    }
}
