-- RW_TOUCH: writes the owner's side of a read-write lock again — a write even when the TTL
-- stays the same — so that `WAIT` on this connection counts the hold (see replicas.rs).
-- KEYS: key, queue; only the lock is touched.
-- ARGV: owner (a writer's ends in ':write'), lease_ms.
-- Returns the lock's TTL in ms (never shortened: other readers share the hash), or 0 when
-- the owner holds no side of it.
if redis.call('hexists', key, owner) == 0 then return 0 end
local ttl = math.max(redis.call('pttl', key), tonumber(lease_ms))
redis.call('pexpire', key, ttl)
return ttl
