-- ACQUIRE: takes the lock for an owner, or queues the owner as a waiter.
-- KEYS: key, queue, deadlines, and fence under Redlock only.
-- ARGV: lease_ms, owner, meta (holder metadata: service, host, pid and request id joined by
--       byte 31, '' for none), waiter_ttl_ms (0: do not queue), publish ('publish' or
--       'spublish').
-- Returns {1, token} when this owner holds the lock (fresh, handed to it, or already its
-- own — acquiring is idempotent, so a retry after a lost reply is safe), else
-- {0, pttl, the holder's token} after queueing the caller, followed by the holder's owner,
-- service, host, pid, acquired-at (ms) and request id when its record has them.
-- The uncontended path first, inline (it is the prelude's `grant` with no floor): a free
-- lock with nobody queued costs four calls.
if not fence and redis.call('exists', key, queue) == 0 then
  local t = redis.call('time')
  local token = t[1] .. string.format('%06d', t[2])
  local record = token .. '\31' .. owner
  if meta ~= '' then record = record .. '\31' .. meta end
  redis.call('hset', key, owner, 1, HOLDER_FIELD, record)
  redis.call('pexpire', key, lease_ms)
  return {1, tonumber(token)}
end
-- @prelude
local t = redis.call('time')
local me = member(lease_ms, owner, meta)
if redis.call('exists', key) == 0 then
  local floor = floor_of(0)
  local head, token = grant_next({t = t, floor = floor, skip = me, publish = publish})
  if head == me then
    return {1, token}
  end
  if not head then
    return {1, grant(owner, meta, lease_ms, t, floor)}
  end
elseif redis.call('hexists', key, owner) == 1 then
  -- Already ours (a retry after a lost reply).
  redis.call('pexpire', key, lease_ms)
  return {1, token_of(redis.call('hget', key, HOLDER_FIELD))}
end
local ttl = tonumber(waiter_ttl_ms)
if ttl > 0 then
  local now = ms_of(t)
  redis.call('zadd', queue, 'NX', now, me)
  redis.call('zadd', deadlines, now + ttl, me)
  redis.call('pexpire', queue, ttl)
  redis.call('pexpire', deadlines, ttl)
end
-- The holder's token: a grant with a token not above it was already superseded.
local record = redis.call('hget', key, HOLDER_FIELD)
local busy = {0, redis.call('pttl', key), token_of(record)}
for _, v in ipairs(holder_fields(record)) do busy[#busy + 1] = v end
return busy
