-- SEM_TOUCH: writes the semaphore again — a write even when nothing changes — so that
-- `WAIT` on this connection counts the owner's permit (see replicas.rs).
-- KEYS: key (holders by expiry), queue, holders (records).
-- ARGV: owner (the permit keeps the expiry it was granted).
-- Returns the permit's remaining ms, or 0 when the owner holds no live permit.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local left = tonumber(redis.call('zscore', key, owner) or '0') - now
if left <= 0 then return 0 end
redis.call('pexpire', key, math.max(redis.call('pttl', key), left))
return left
