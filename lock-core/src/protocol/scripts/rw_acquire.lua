-- RW_ACQUIRE: takes a side of a read-write lock for an owner, or queues the owner.
-- KEYS: key, queue (fence: never; read-write locks are refused under Redlock).
-- ARGV: lease_ms, owner (a writer's ends in ':write'), meta (holder metadata, '' for none),
--       waiter_ttl_ms (0: do not queue), publish ('publish' or 'spublish'), side ('read' or
--       'write').
-- A reader is granted while nobody writes and no live waiter is queued before it; a writer
-- while nobody holds the lock. Returns {1, token} when this owner holds its side (fresh,
-- handed to it, or already its own: a retry after a lost reply is safe), else {0, pttl,
-- the holds' highest token, a holder's record or nil} after queueing the caller (the client
-- reads the holder's fields from the record). A hash that is not a read-write
-- lock (no `mode`: a lock of `client.lock`) is busy and left alone.
local present = redis.call('exists', key, queue)
-- The uncontended path first, inline: a free lock with nobody queued costs five calls.
if present == 0 then
  local t = redis.call('time')
  local token = t[1] .. string.sub('00000' .. t[2], -6)
  local record = token .. '\31' .. owner
  if meta ~= '' then record = record .. '\31' .. meta end
  redis.call('hset', key, 'mode', side, owner, '1', HOLDER_FIELD .. ':' .. owner, record)
  if side == 'read' then
    redis.call('set', '{' .. key .. '}:' .. owner .. ':rwlock_timeout:1', '1', 'px', lease_ms)
  end
  redis.call('pexpire', key, lease_ms)
  return {1, tonumber(token)}
end
-- The lock's mode and the caller's hold count in one call. A hash without a mode is not a
-- read-write lock (a lock of `client.lock`): busy, left alone.
local state = redis.call('hmget', key, 'mode', owner)
local mode, mine = state[1], state[2]
if not mode and (present == 2 or redis.call('exists', key) == 1) then
  return {0, redis.call('pttl', key), 0}
end
local t = redis.call('time')
local ttl = tonumber(waiter_ttl_ms)
if mode == 'write' and not mine then
  -- Another writer holds it, and while it does (its hold lives as long as the hash) nothing
  -- can be granted: the busy path, inline (it runs once per contended acquisition).
  -- The prelude's `holds` for the busy answer: the highest token of distlock's records,
  -- and its record (the writer's: readers are only granted while nobody writes, and a
  -- writer's own read holds are Redisson's, which keep no record).
  local fields = redis.call('hgetall', key)
  local top, record = 0, nil
  local prefix = HOLDER_FIELD .. ':'
  for i = 1, #fields, 2 do
    if string.sub(fields[i], 1, #prefix) == prefix then
      local token = tonumber(string.match(fields[i + 1], '^%d+') or '0')
      if not record or token > top then top, record = token, fields[i + 1] end
    end
  end
  if ttl > 0 then
    -- The prelude's `enqueue` and `member`, inline.
    local me = lease_ms .. '|' .. owner .. '|' .. meta
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    -- @inline queue_waiter
  end
  return {0, redis.call('pttl', key), top, record}
end
-- @prelude
local me = member(lease_ms, owner, meta)
local now = ms_of(t)
if mine then
  -- Already ours (a retry after a lost reply).
  if side == 'read' then
    redis.call('set', timeout_key(owner, 1), '1', 'px', lease_ms)
  end
  if redis.call('pttl', key) < tonumber(lease_ms) then
    redis.call('pexpire', key, lease_ms)
  end
  return {1, token_of(redis.call('hget', key, record_field(owner)))}
end
-- A reader joining readers with nobody queued (a mode and one key: the lock, no queue): no
-- need to read every hold.
if side == 'read' and mode == 'read' and present == 1 then
  return {1, grant_side(owner, meta, lease_ms, t, 0, false)}
end
local readers, writers, top, record = holds()
-- Readers hold it, or nobody (a writer's hold returned above): dead readers go, then the
-- queue's head and the caller may fit.
local held = prune_readers(readers, writers)
if not held then
  -- Every holder died: the lock is free (their records go with the hash).
  redis.call('del', key)
end
local free = not held
local reading = held and next(writers) == nil
local token, granted
token, granted, free, reading = grant_waiting(t, top, me, publish, free, reading)
if not token and redis.call('exists', queue) == 0
    and (free or (reading and side == 'read')) then
  token = grant_side(owner, meta, lease_ms, t, top, free)
end
if token then
  return {1, token}
end
if granted > 0 then
  -- A local `_`: a global write is refused (Redis protects a script's globals).
  local _
  _, _, top, record = holds()
end
if ttl > 0 then
  enqueue(me, t, ttl)
end
return busy(top, record)
