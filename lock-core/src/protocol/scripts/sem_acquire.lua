-- SEM_ACQUIRE: gives an owner one permit of a semaphore, or queues it as a waiter.
-- KEYS: key (holders by expiry), queue, holders (records).
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
  local token = t[1] .. string.sub('00000' .. t[2], -6)
  local record = token .. '\31' .. owner
  if meta ~= '' then record = record .. '\31' .. meta end
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('zadd', key, string.format('%d', now + tonumber(lease_ms)), owner)
  redis.call('hset', holders, owner, record)
  redis.call('pexpire', key, lease_ms)
  redis.call('pexpire', holders, lease_ms)
  return {1, tonumber(token)}
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- The first permit to expire: whether any died, and the busy answer's.
local first = redis.call('zrange', key, '0', '0', 'WITHSCORES')
local held, mine
if not (first[2] and tonumber(first[2]) <= now) then
  -- No permit expired. The busy path, inline (it runs once per contended acquisition): the
  -- caller holds no permit and does not fit, and every change of the holds ran the
  -- hand-off, so nobody queued fits either (waiters of one capacity; see grant_waiting).
  -- With one permit, a first holder is all it takes to be full (no ZCARD); `held` is then a
  -- lower bound, which the code below only compares with the caller's capacity of 1.
  if first[1] and capacity == '1' then
    held = 1
  else
    held = redis.call('zcard', key)
  end
  if held >= tonumber(capacity) then
    -- Whether the caller holds a permit (every permit has its record), and the busy
    -- answer's record, in one call.
    local records = redis.call('hmget', holders, owner, first[1])
    mine = records[1]
    if not mine then
      local ttl = tonumber(waiter_ttl_ms)
      if ttl > 0 then
        -- The prelude's `enqueue` and `sem_member`, inline.
        local me = lease_ms .. ':' .. capacity .. '|' .. owner .. '|' .. meta
        -- @inline queue_waiter
      end
      return {0, tonumber(first[2]) - now, 0, records[2]}
    end
  end
end
-- @prelude
local changed = prune(now, first)
if changed then
  held = nil
end
if mine == nil then
  mine = redis.call('zscore', key, owner)
end
if mine then
  -- Already ours (a retry after a lost reply): its expiry moves on, never back.
  redis.call('zadd', key, 'GT', string.format('%d', now + tonumber(lease_ms)), owner)
  expire_at_latest(now)
  return {1, token_of(redis.call('hget', holders, owner))}
end
local me = sem_member(lease_ms, capacity, owner, meta)
held = held or redis.call('zcard', key)
-- As on the busy path above: unless permits just expired, nobody queued fits while the
-- caller does not.
local token, granted, waiting = nil, 0, true
if changed or held < tonumber(capacity) then
  token, granted, waiting = grant_waiting(t, me, publish, held)
end
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
  enqueue(me, t, ttl)
end
if changed or granted > 0 then
  first = redis.call('zrange', key, '0', '0', 'WITHSCORES')
end
return busy(now, first)
