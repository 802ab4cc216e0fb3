-- LINGER: ends a hold but keeps the lock until a moment decided at its start (a scheduled
-- job's `hold_at_least`): instead of deleting the hash it sets the lease that is left.
-- Owner-checked, so a hold that expired or was taken over is left alone. The lock stays
-- Redisson's hash with a TTL; waiters retry when the TTL runs out.
-- KEYS: key, queue, and fence under Redlock only (only the lock is touched).
-- ARGV: owner, remaining_ms.
-- Returns 1 when the owner held the lock (it now expires in remaining_ms), else 0.
if redis.call('hexists', key, owner) == 0 then return 0 end
redis.call('pexpire', key, remaining_ms)
return 1
