//! Redisson 3.27's own `RLock` scripts, verbatim: the benchmark runs them as a reference
//! peer, and the tests speak Redisson's protocol with them.

/// `tryLockInnerAsync`. KEYS: lock. ARGV: lease ms, owner. Nil when acquired, else the
/// holder's PTTL.
pub const LOCK: &str = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";

/// `unlockInnerAsync`. KEYS: lock, channel, unlock latch. ARGV: message, lease ms, owner,
/// publish command (`PUBLISH`, or `SPUBLISH` on a sharded Cluster), latch lease ms.
pub const UNLOCK: &str = "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val); end; if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end;";

/// `renewExpirationAsync`. KEYS: lock. ARGV: lease ms, owner. 1 when still held.
pub const RENEW: &str = "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('pexpire', KEYS[1], ARGV[1]); return 1; end; return 0;";
