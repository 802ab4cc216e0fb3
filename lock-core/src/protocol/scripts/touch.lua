-- TOUCH: sets the lease of the owner's hold again — a write even when the TTL stays the
-- same — so that `WAIT` on this connection counts the hold (see replicas.rs).
-- KEYS: key, queue (and fence under Redlock); only the lock is touched.
-- ARGV: owner, lease_ms.
-- Returns the lock's TTL in ms, or 0 when the owner does not hold the lock.
if redis.call('hexists', key, owner) == 0 then return 0 end
redis.call('pexpire', key, lease_ms)
return redis.call('pttl', key)
