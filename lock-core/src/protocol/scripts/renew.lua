-- RENEW: renews a batch of locks in one call (the watchdog's tick, or one extension).
-- KEYS: the n locks (not the one-lock order of the other scripts: this one takes many
--       locks, all in one slot). Their holder records are fields of the locks and go along.
-- ARGV: owner and lease_ms of each lock, in order (2n values).
-- For each lock still held by its owner, raises its TTL to at least the lease (never
-- shortens it) and answers the resulting TTL in ms; answers 0 for a lock the owner lost.
-- Returns the n answers in order.
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local owner, lease_ms = ARGV[2 * i - 1], tonumber(ARGV[2 * i])
  if redis.call('hexists', key, owner) == 1 then
    local ttl = redis.call('pttl', key)
    if ttl < lease_ms then
      redis.call('pexpire', key, lease_ms)
      ttl = lease_ms
    end
    out[i] = ttl
  else
    out[i] = 0
  end
end
return out
