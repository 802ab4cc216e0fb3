-- SEM_ACQUIRE: gives an owner one permit of a semaphore, or queues it as a waiter.
-- KEYS: key (holders by expiry), queue, deadlines, holders (records).
-- ARGV: lease_ms, owner, meta (holder metadata, '' for none), waiter_ttl_ms (0: do not
--       queue), publish ('publish' or 'spublish'), capacity (the caller's permits).
-- A permit is granted while fewer than the caller's capacity are held and no live waiter is
-- queued before it. Returns {1, token} when this owner holds a permit (fresh, handed to it,
-- or already its own: a retry after a lost reply is safe), else {0, ms until the first
-- permit expires, 0, that holder's record or nil} after queueing the caller (the client
-- reads the token and fields from the record).
-- The uncontended path first, inline: no permit held and nobody queued costs six calls.
if redis.call('exists', key, queue) == 0 then
  local t = redis.call('time')
  local token = t[1] .. string.format('%06d', t[2])
  local record = token .. '\31' .. owner
  if meta ~= '' then record = record .. '\31' .. meta end
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('zadd', key, now + tonumber(lease_ms), owner)
  redis.call('hset', holders, owner, record)
  redis.call('pexpire', key, lease_ms)
  redis.call('pexpire', holders, lease_ms)
  return {1, tonumber(token)}
end
-- @prelude
local t = redis.call('time')
local now = ms_of(t)
-- The first permit to expire: whether any died, and the busy answer's.
local first = redis.call('zrange', key, 0, 0, 'WITHSCORES')
local changed = prune(now, first)
local mine = redis.call('zscore', key, owner)
if mine then
  -- Already ours (a retry after a lost reply).
  if tonumber(mine) < now + tonumber(lease_ms) then
    redis.call('zadd', key, now + tonumber(lease_ms), owner)
  end
  expire_at_latest(now)
  return {1, token_of(redis.call('hget', holders, owner))}
end
local me = sem_member(lease_ms, capacity, owner, meta)
local held = redis.call('zcard', key)
local token, granted, waiting = grant_waiting(t, me, publish, held)
if not token and not waiting and held + granted < tonumber(capacity) then
  token = give(owner, meta, lease_ms, t, 0)
end
if changed or granted > 0 or token then
  expire_at_latest(now)
end
if token then
  return {1, token}
end
local ttl = tonumber(waiter_ttl_ms)
if ttl > 0 then
  -- Strictly in arrival order: waiters queued within one millisecond are not ordered by
  -- their members' bytes (a retry keeps its place: NX).
  local last = redis.call('zrange', queue, -1, -1, 'WITHSCORES')[2]
  redis.call('zadd', queue, 'NX', math.max(now, (tonumber(last) or 0) + 1), me)
  redis.call('zadd', deadlines, now + ttl, me)
  redis.call('pexpire', queue, ttl)
  redis.call('pexpire', deadlines, ttl)
end
if changed or granted > 0 then
  first = redis.call('zrange', key, 0, 0, 'WITHSCORES')
end
return busy(now, first)
