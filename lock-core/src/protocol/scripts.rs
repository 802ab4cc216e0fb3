//! The Lua scripts. The lock itself is Redisson's `RLock` layout: a hash `owner → hold
//! count` with a PEXPIRE, and a release publishes `0` on `redisson_lock__channel:{<key>}`.
//! On top of it distlock keeps a fair queue of waiters, so a release hands the lock straight
//! to the next live waiter (publishing `distlock:grant:<owner>:<token>`, which Redisson
//! ignores) instead of waking everyone to race:
//!
//! - queue `distlock__queue:{<key>}`: ZSET of waiters by arrival time (ms, Redis clock);
//! - deadlines `distlock__waiters:{<key>}`: ZSET of the same waiters by liveness deadline;
//!   a waiter refreshes it while it waits, so a crashed waiter is skipped.
//!
//! - holder `distlock__holder:{<key>}`: STRING of who holds the lock, with the lock's TTL:
//!   owner, service, host, pid, request id and acquired-at (ms, Redis clock) joined by byte
//!   31 — one `SET … PX` per acquisition, the cheapest record Redis can keep.
//!
//! A waiter's member is `<lease ms>|<owner>|<metadata>`, so a hand-off can set the waiter's
//! own lease and holder record (owners never contain `|`; only the first two count, and a
//! member without metadata is accepted). Metadata is service, host, pid and request id
//! joined by byte 31 ([`crate::protocol::holder`] keeps control bytes out of the values).
//! Every script touches only keys of one lock, all in one slot (see
//! [`LockKeys`](crate::protocol::name::LockKeys)). `redis::Script` sends EVALSHA and loads the
//! script on NOSCRIPT, so a `SCRIPT FLUSH` or a restart is survived.

use std::sync::LazyLock;

use std::time::Duration;

use redis::{Script, ScriptInvocation};

use crate::protocol::name::LockKeys;

/// Shared Lua: the Redis clock, fencing tokens, holder records, and handing a free lock to
/// the first live waiter.
const PRELUDE: &str = r"
-- The Redis clock, read at most once per script run.
local clock = nil
local function redis_time()
  clock = clock or redis.call('time')
  return clock
end
local function now_ms()
  local t = redis_time()
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- The next fencing token. A new counter (the lock's first hold, or one lost with Redis'
-- data) starts at the Redis clock in microseconds, not at 1, so tokens stay increasing
-- across a restart without persistence: an old counter is at most its start plus one per
-- acquisition, far below the clock by the time it could be lost.
local function next_token(fence)
  local token = redis.call('incr', fence)
  if token ~= 1 then return token end
  local t = redis_time()
  local start = t[1] .. string.format('%06d', tonumber(t[2]))
  redis.call('set', fence, start)
  return tonumber(start)
end
-- Records who holds the lock, with the lock's lease: owner, then `meta` (service, host,
-- pid and request id separated by byte 31), then the time. Without metadata any stale
-- record is deleted. `now` may be nil: the clock is read only when a record is written.
local function set_holder(holder, owner, meta, now, lease)
  if meta == '' then
    redis.call('del', holder)
    return
  end
  redis.call('set', holder, owner .. '\31' .. meta .. '\31' .. (now or now_ms()), 'px', lease)
end
-- The holder record's fields (owner, service, host, pid, acquired-at ms, request id) when it
-- belongs to an owner of `key`, else nil.
local function holder_of(key, holder)
  local record = redis.call('get', holder)
  if not record then return nil end
  local f = {}
  for v in string.gmatch(record .. '\31', '([^\31]*)\31') do f[#f + 1] = v end
  if redis.call('hexists', key, f[1]) == 0 then return nil end
  return {f[1], f[2] or '', f[3] or '', f[4] or '', f[6] or '', f[5] or ''}
end
-- Grants the (free) lock to the first waiter whose deadline has not passed, dropping dead
-- ones. Publishes the grant (with `publish`: PUBLISH, or SPUBLISH on a Cluster) unless the
-- grantee is `caller`. Returns member, token or nil.
local function grant_next(key, fence, queue, deadlines, channel, holder, now, caller, publish)
  for _ = 1, 64 do
    local head = redis.call('zrange', queue, 0, 0)[1]
    if not head then return nil end
    local deadline = tonumber(redis.call('zscore', deadlines, head) or '0')
    redis.call('zrem', queue, head)
    redis.call('zrem', deadlines, head)
    if deadline > now then
      local sep = string.find(head, '|', 1, true)
      local lease, owner, meta = string.sub(head, 1, sep - 1), string.sub(head, sep + 1), ''
      local sep2 = string.find(owner, '|', 1, true)
      if sep2 then
        owner, meta = string.sub(owner, 1, sep2 - 1), string.sub(owner, sep2 + 1)
      end
      redis.call('hset', key, owner, 1)
      redis.call('pexpire', key, lease)
      set_holder(holder, owner, meta, now, lease)
      local token = next_token(fence)
      if head ~= caller then
        -- '%d': `..` would print a token above 10^14 as '1.79e+15'.
        redis.call(publish, channel, 'distlock:grant:' .. owner .. ':' .. string.format('%d', token))
      end
      return head, token
    end
  end
  return nil
end
";

fn with_prelude(body: &str) -> Script {
    Script::new(&format!("{PRELUDE}{body}"))
}

/// KEYS: lock, fence, queue, deadlines, channel, holder.
/// ARGV: lease ms, owner, waiter TTL ms (0: do not queue), metadata, publish command.
/// Returns `{1, token}` when this owner holds the lock (fresh, handed to it, or already
/// its own — acquiring is idempotent, so a retry after a lost reply is safe), else
/// `{0, pttl, fencing counter}` after queueing the caller, followed by the holder's owner,
/// service, host, pid, acquired-at (ms) and request id when its record is there.
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    with_prelude(
        r"
local key, fence, queue, deadlines, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local holder = KEYS[6]
local lease, owner, wttl, meta, publish = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
local me = lease .. '|' .. owner .. '|' .. meta
-- The uncontended path first: a free lock with nobody queued costs seven calls.
local now = nil
if redis.call('exists', key) == 0 then
  local head, token = nil, nil
  if redis.call('zcard', queue) > 0 then
    now = now_ms()
    head, token = grant_next(key, fence, queue, deadlines, channel, holder, now, me, publish)
  end
  if head == me then
    return {1, token}
  end
  if not head then
    redis.call('hincrby', key, owner, 1)
    redis.call('pexpire', key, lease)
    set_holder(holder, owner, meta, now, lease)
    return {1, next_token(fence)}
  end
elseif redis.call('hexists', key, owner) == 1 then
  -- Already ours (a retry after a lost reply): the record, if any, is ours too.
  redis.call('pexpire', key, lease)
  redis.call('pexpire', holder, lease)
  return {1, tonumber(redis.call('get', fence) or '0')}
end
now = now or now_ms()
if wttl > 0 then
  redis.call('zadd', queue, 'NX', now, me)
  redis.call('zadd', deadlines, now + wttl, me)
  redis.call('pexpire', queue, wttl)
  redis.call('pexpire', deadlines, wttl)
end
-- The fencing counter now: a grant with a token not above it was already superseded.
local busy = {0, redis.call('pttl', key), tonumber(redis.call('get', fence) or '0')}
for _, v in ipairs(holder_of(key, holder) or {}) do busy[#busy + 1] = v end
return busy
",
    )
});

/// KEYS: lock, channel, fence, queue, deadlines, holder.
/// ARGV: owner, lease ms, member, publish command.
/// Returns 0 when the owner holds nothing (it only leaves the queue), 1 when the lock was
/// deleted and `0` published, 2 when a reentrant hold remains (Redisson clients), 3 when
/// the lock was handed to the next waiter.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    with_prelude(
        r"
local key, channel, fence, queue, deadlines = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local holder = KEYS[6]
local count = tonumber(redis.call('hget', key, ARGV[1]) or '0')
if count <= 0 then
  redis.call('zrem', queue, ARGV[3])
  redis.call('zrem', deadlines, ARGV[3])
  return 0
end
if count > 1 then
  redis.call('hincrby', key, ARGV[1], -1)
  redis.call('pexpire', key, ARGV[2])
  redis.call('pexpire', holder, ARGV[2])
  return 2
end
redis.call('del', key, holder)
if redis.call('zcard', queue) > 0 and grant_next(key, fence, queue, deadlines, channel, holder, now_ms(), '', ARGV[4]) then
  return 3
end
redis.call(ARGV[4], channel, '0')
return 1
",
    )
});

/// KEYS: lock. ARGV: owner, lease ms. Sets the lease of the owner's hold again — a write even
/// when the TTL stays the same — and answers the TTL in ms, or 0 when the owner does not
/// hold the lock. Run before `WAIT` on the connection that waits: `WAIT` counts only writes
/// of its own connection, and this one comes after the acquisition in the replication
/// stream, whoever wrote that (a releasing holder hands the lock over in its own script).
static TOUCH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('pexpire', KEYS[1], ARGV[2])
return redis.call('pttl', KEYS[1])
",
    )
});

/// KEYS: fence. ARGV: token. Raises the fencing counter to at least the token (Redlock: so
/// that any later majority, which shares a node with this one, issues a greater token).
static FENCE_FLOOR: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if tonumber(redis.call('get', KEYS[1]) or '0') < tonumber(ARGV[1]) then
  redis.call('set', KEYS[1], ARGV[1])
end
return 1
",
    )
});

/// KEYS: lock, channel, fence, queue, deadlines, holder. ARGV: publish command.
/// Deletes the lock whoever holds it, and its holder record, then hands it to the next
/// waiter or publishes `0`. Returns 0 when there was no lock, 1 when it was deleted, 2 when
/// it was deleted and handed to a waiter.
pub(crate) static FORCE_RELEASE: LazyLock<Script> = LazyLock::new(|| {
    with_prelude(
        r"
local key, channel, fence, queue, deadlines = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local holder = KEYS[6]
if redis.call('exists', key) == 0 then
  return 0
end
redis.call('del', key, holder)
if redis.call('zcard', queue) > 0 and grant_next(key, fence, queue, deadlines, channel, holder, now_ms(), '', ARGV[1]) then
  return 2
end
redis.call(ARGV[1], channel, '0')
return 1
",
    )
});

/// KEYS: lock, fence, queue, deadlines, holder.
/// A consistent snapshot: `{type, HGETALL of the lock, pttl, last fencing token, live
/// waiters, holder record (owner, service, host, pid, acquired-at ms, request id or empty)}`.
pub(crate) static INSPECT: LazyLock<Script> = LazyLock::new(|| {
    with_prelude(
        r"
local key, fence, queue, deadlines, holder = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local kind = redis.call('type', key).ok
local fields = {}
if kind == 'hash' then fields = redis.call('hgetall', key) end
local record = {}
if kind == 'hash' then record = holder_of(key, holder) or {} end
local waiters = redis.call('zcount', deadlines, '(' .. now_ms(), '+inf')
return {kind, fields, redis.call('pttl', key), tonumber(redis.call('get', fence) or '0'), waiters, record}
",
    )
});

/// KEYS: locks, then their holder records in the same order. ARGV: owner and lease ms for
/// each lock, in order.
/// For each lock still held by its owner, raises its TTL to at least the lease (never
/// shortens it), gives its holder record (the owner's: only the owner's acquisition
/// writes it while it holds the lock) the same TTL, and answers the resulting
/// TTL in ms; answers 0 for a lock the owner lost.
pub(crate) static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local out = {}
local n = #ARGV / 2
for i = 1, n do
  local key, owner, lease = KEYS[i], ARGV[2 * i - 1], tonumber(ARGV[2 * i])
  local holder = KEYS[n + i]
  if redis.call('hexists', key, owner) == 1 then
    local ttl = redis.call('pttl', key)
    if ttl < lease then
      redis.call('pexpire', key, lease)
      ttl = lease
    end
    redis.call('pexpire', holder, ttl)
    out[i] = ttl
  else
    out[i] = 0
  end
end
return out
",
    )
});

/// How release and grant messages are published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Publish {
    /// `PUBLISH`: one server, Sentinel, Redlock, or a Cluster without sharded pub/sub.
    Plain,
    /// `SPUBLISH` (Redis 7+): a Cluster, where the message then stays within the lock's
    /// shard — as Redisson 3.23+ publishes on a Cluster that supports it.
    Sharded,
}

impl Publish {
    fn command(self) -> &'static str {
        match self {
            Self::Plain => "publish",
            Self::Sharded => "spublish",
        }
    }
}

/// An ACQUIRE call; `waiter_ttl` zero means "do not queue".
pub(crate) fn acquire(
    keys: &LockKeys,
    owner: &str,
    lease: Duration,
    waiter_ttl: Duration,
    meta: &str,
    publish: Publish,
) -> ScriptInvocation<'static> {
    let mut call = ACQUIRE.prepare_invoke();
    call.key(&keys.lock)
        .key(&keys.fence)
        .key(&keys.queue)
        .key(&keys.deadlines)
        .key(&keys.channel)
        .key(&keys.holder)
        .arg(millis(lease))
        .arg(owner)
        .arg(millis(waiter_ttl))
        .arg(meta)
        .arg(publish.command());
    call
}

/// A RELEASE call: releases `owner`'s hold, or takes its entry (queued with `meta`) out of
/// the queue.
pub(crate) fn release(
    keys: &LockKeys,
    owner: &str,
    lease: Duration,
    meta: &str,
    publish: Publish,
) -> ScriptInvocation<'static> {
    let mut call = RELEASE.prepare_invoke();
    call.key(&keys.lock)
        .key(&keys.channel)
        .key(&keys.fence)
        .key(&keys.queue)
        .key(&keys.deadlines)
        .key(&keys.holder)
        .arg(owner)
        .arg(millis(lease))
        .arg(member(lease, owner, meta))
        .arg(publish.command());
    call
}

/// A TOUCH call.
pub(crate) fn touch(keys: &LockKeys, owner: &str, lease: Duration) -> ScriptInvocation<'static> {
    let mut call = TOUCH.prepare_invoke();
    call.key(&keys.lock).arg(owner).arg(millis(lease));
    call
}

/// A FENCE_FLOOR call.
pub(crate) fn fence_floor(keys: &LockKeys, token: u64) -> ScriptInvocation<'static> {
    let mut call = FENCE_FLOOR.prepare_invoke();
    call.key(&keys.fence).arg(token);
    call
}

/// A FORCE_RELEASE call.
pub(crate) fn force_release(keys: &LockKeys, publish: Publish) -> ScriptInvocation<'static> {
    let mut call = FORCE_RELEASE.prepare_invoke();
    call.key(&keys.lock)
        .key(&keys.channel)
        .key(&keys.fence)
        .key(&keys.queue)
        .key(&keys.deadlines)
        .key(&keys.holder)
        .arg(publish.command());
    call
}

/// An INSPECT call.
pub(crate) fn inspect(keys: &LockKeys) -> ScriptInvocation<'static> {
    let mut call = INSPECT.prepare_invoke();
    call.key(&keys.lock)
        .key(&keys.fence)
        .key(&keys.queue)
        .key(&keys.deadlines)
        .key(&keys.holder);
    call
}

/// A RENEW call for `(keys, owner, lease)` of each lock: the locks, then their holder
/// records, as the script expects.
pub(crate) fn renew<'a>(
    locks: impl IntoIterator<Item = (&'a LockKeys, &'a str, Duration)> + Clone,
) -> ScriptInvocation<'static> {
    let mut call = RENEW.prepare_invoke();
    for (keys, owner, lease) in locks.clone() {
        call.key(&keys.lock).arg(owner).arg(millis(lease));
    }
    for (keys, _, _) in locks {
        call.key(&keys.holder);
    }
    call
}

/// The prefix of a grant message; the rest is `<owner>:<token>`.
pub(crate) const GRANT_PREFIX: &[u8] = b"distlock:grant:";

/// A waiter's queue member: `<lease ms>|<owner>|<metadata>`.
fn member(lease: Duration, owner: &str, meta: &str) -> String {
    format!("{}|{owner}|{meta}", millis(lease))
}

/// Milliseconds for Redis arguments (leases are validated to fit).
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The owner and fencing token of a grant message, `distlock:grant:<owner>:<token>` (owners
/// contain `:` themselves, tokens do not).
pub(crate) fn parse_grant(payload: &[u8]) -> Option<(&str, u64)> {
    let grant = std::str::from_utf8(payload.strip_prefix(GRANT_PREFIX)?).ok()?;
    let (owner, token) = grant.rsplit_once(':')?;
    Some((owner, token.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_name_the_owner_and_token() {
        let owner = "3db65fe7-939f-4757-93a2-a2f87f354cca:17";
        let grant = format!("distlock:grant:{owner}:1795436339923456");
        assert_eq!(
            parse_grant(grant.as_bytes()),
            Some((owner, 1_795_436_339_923_456))
        );
    }

    #[test]
    fn unreadable_grants_are_none() {
        // What Lua's `..` once made of a token above 10^14.
        assert_eq!(parse_grant(b"distlock:grant:u:1:1.7954357565964e+15"), None);
        assert_eq!(parse_grant(b"0"), None);
        assert_eq!(parse_grant(b"distlock:grant:no-token"), None);
    }
}
