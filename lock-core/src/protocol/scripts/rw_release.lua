-- RW_RELEASE: releases an owner's side of a read-write lock, or takes its entry out of the
-- queue.
-- KEYS: key, queue, deadlines.
-- ARGV: owner (a writer's ends in ':write'), lease_ms, publish ('publish' or 'spublish'),
--       and meta (the holder metadata its acquisition sent) only when the owner may still
--       be queued.
-- Returns 0 when the owner holds nothing (it only leaves the queue), 1 when its hold ended
-- (the lock deleted and Redisson's message published — RELEASE_MESSAGE after a reader,
-- WRITE_RELEASE_MESSAGE after a writer — or other holds remain), 2 when a reentrant hold
-- remains (Redisson clients), 3 when the lock was handed to waiters.
local count = redis.call('hget', key, owner)
-- The uncontended path first: the only hold (mode, its field, its record) ends and nobody
-- is queued.
if count == '1' and redis.call('exists', queue) == 0 and redis.call('hlen', key) == 3 then
  redis.call('del', key)
  if string.sub(owner, -6) == ':write' then
    redis.call(publish, CHANNEL_PREFIX .. '{' .. key .. '}', WRITE_RELEASE_MESSAGE)
  else
    redis.call('del', '{' .. key .. '}:' .. owner .. ':rwlock_timeout:1')
    redis.call(publish, CHANNEL_PREFIX .. '{' .. key .. '}', RELEASE_MESSAGE)
  end
  return 1
end
-- @prelude
local holds_now = tonumber(count or '0')
if holds_now <= 0 then
  if meta then
    local me = member(lease_ms, owner, meta)
    redis.call('zrem', queue, me)
    redis.call('zrem', deadlines, me)
  end
  return 0
end
local writer = is_writer(owner)
if holds_now > 1 then
  redis.call('hincrby', key, owner, -1)
  if not writer then
    redis.call('del', timeout_key(owner, holds_now))
  end
  return 2
end
local released = token_of(redis.call('hget', key, record_field(owner)))
redis.call('hdel', key, owner, record_field(owner))
if not writer then
  redis.call('del', timeout_key(owner, 1))
end
if not writer and redis.call('exists', queue) == 0 and redis.call('hlen', key) > 1 then
  -- Other holds remain and nobody waits: nothing to hand on, no need to read every hold
  -- (dead readers go with the hash's TTL, or at the next contended call).
  return 1
end
local readers, writers, top = holds()
local floor = math.max(top, released)
local t = redis.call('time')
if prune_readers(readers, writers) then
  local reading = next(writers) == nil
  if reading then
    -- A writer's own read holds (Redisson's) remain: the lock is now read-locked.
    redis.call('hset', key, 'mode', 'read')
  end
  grant_waiting(t, floor, '', publish, false, reading)
  return 1
end
redis.call('del', key)
local _, granted = grant_waiting(t, floor, '', publish, true, false)
if granted > 0 then
  return 3
end
redis.call(publish, channel(), writer and WRITE_RELEASE_MESSAGE or RELEASE_MESSAGE)
return 1
