//! Redisson's own `RLock` (3.27) and `RReadWriteLock` (current) scripts, verbatim: the benchmark runs them as a reference
//! peer, and the tests speak Redisson's protocol with them.

/// `tryLockInnerAsync`. KEYS: lock. ARGV: lease ms, owner. Nil when acquired, else the
/// holder's PTTL.
pub const LOCK: &str = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";

/// `unlockInnerAsync`. KEYS: lock, channel, unlock latch. ARGV: message, lease ms, owner,
/// publish command (`PUBLISH`, or `SPUBLISH` on a sharded Cluster), latch lease ms.
pub const UNLOCK: &str = "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val); end; if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end;";

/// `renewExpirationAsync`. KEYS: lock. ARGV: lease ms, owner. 1 when still held.
pub const RENEW: &str = "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('pexpire', KEYS[1], ARGV[1]); return 1; end; return 0;";

/// `RedissonReadLock.tryLockInnerAsync` (Redisson's current source, verbatim). KEYS: lock,
/// timeout prefix `{<lock>}:<owner>:rwlock_timeout`. ARGV: lease ms, owner, the owner's
/// write name `<owner>:write`. Nil when acquired, else the lock's PTTL.
pub const READ_LOCK: &str = "local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then redis.call('hset', KEYS[1], 'mode', 'read'); redis.call('hset', KEYS[1], ARGV[2], 1); redis.call('set', KEYS[2] .. ':1', 1); redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1); local key = KEYS[2] .. ':' .. ind;redis.call('set', key, 1); redis.call('pexpire', key, ARGV[1]); local remainTime = redis.call('pttl', KEYS[1]); redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1])); return nil; end;return redis.call('pttl', KEYS[1]);";

/// `RedissonReadLock.unlockInnerAsync`, verbatim. KEYS: lock, channel
/// `redisson_rwlock:{<lock>}`, timeout prefix, key prefix `{<lock>}`, unlock latch. ARGV:
/// message (`0`), owner, publish command, latch lease ms.
pub const READ_UNLOCK: &str = "local val = redis.call('get', KEYS[5]); if val ~= false then return tonumber(val);end; local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then redis.call(ARGV[3], KEYS[2], ARGV[1]); redis.call('set', KEYS[5], 1, 'px', ARGV[4]); return nil; end; local lockExists = redis.call('hexists', KEYS[1], ARGV[2]); if (lockExists == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); if (counter == 0) then redis.call('hdel', KEYS[1], ARGV[2]); end;redis.call('del', KEYS[3] .. ':' .. (counter+1)); if (redis.call('hlen', KEYS[1]) > 1) then local maxRemainTime = -3; local keys = redis.call('hkeys', KEYS[1]); for n, key in ipairs(keys) do counter = tonumber(redis.call('hget', KEYS[1], key)); if type(counter) == 'number' then for i=counter, 1, -1 do local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i); maxRemainTime = math.max(remainTime, maxRemainTime);end; end; end; if maxRemainTime > 0 then redis.call('pexpire', KEYS[1], maxRemainTime); redis.call('set', KEYS[5], 0, 'px', ARGV[4]); return 0; end;if mode == 'write' then redis.call('set', KEYS[5], 0, 'px', ARGV[4]); return 0;end; end; redis.call('del', KEYS[1]); redis.call(ARGV[3], KEYS[2], ARGV[1]); redis.call('set', KEYS[5], 1, 'px', ARGV[4]); return 1; ";

/// `RedissonWriteLock.tryLockInnerAsync`, verbatim. KEYS: lock. ARGV: lease ms, the
/// owner's write name `<owner>:write`. Nil when acquired, else the lock's PTTL.
pub const WRITE_LOCK: &str = "local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then redis.call('hset', KEYS[1], 'mode', 'write'); redis.call('hset', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if (mode == 'write') then if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); local currentExpire = redis.call('pttl', KEYS[1]); redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); return nil; end; end;return redis.call('pttl', KEYS[1]);";

/// `RedissonWriteLock.unlockInnerAsync`, verbatim. KEYS: lock, channel, unlock latch. ARGV:
/// message (`1`), lease ms, the owner's write name, publish command, latch lease ms.
pub const WRITE_UNLOCK: &str = "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val);end; local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then redis.call(ARGV[4], KEYS[2], ARGV[1]); redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return nil; end;if (mode == 'write') then local lockExists = redis.call('hexists', KEYS[1], ARGV[3]); if (lockExists == 0) then return nil;else local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; else redis.call('hdel', KEYS[1], ARGV[3]); if (redis.call('hlen', KEYS[1]) == 1) then redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); else redis.call('hset', KEYS[1], 'mode', 'read'); end; redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end; end; end; return nil;";

/// The unlock latch key of one `unlockInnerAsync` call: Redisson names it after a request
/// id it generates for every unlock (`getUnlockLatchName(requestId)`), so that only a retry
/// of that same call finds it. A latch named after the owner alone would be found by the
/// owner's next unlock within 13.5 s, which would then return early and leave the lock held.
pub fn unlock_latch(name: &str, owner: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static REQUESTS: AtomicU64 = AtomicU64::new(0);
    let request = REQUESTS.fetch_add(1, Ordering::Relaxed);
    format!("redisson_unlock_latch:{{{name}}}:{owner}:{request}")
}
