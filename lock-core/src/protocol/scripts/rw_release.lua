-- RW_RELEASE: releases an owner's side of a read-write lock, or takes its entry out of the
-- queue.
-- KEYS: key, queue.
-- ARGV: owner (a writer's ends in ':write'), lease_ms, publish ('publish' or 'spublish'),
--       and meta (the holder metadata its acquisition sent) only when the owner may still
--       be queued.
-- Returns 0 when the owner holds nothing (it only leaves the queue), 1 when its hold ended
-- (the lock deleted and Redisson's message published — RELEASE_MESSAGE after a reader,
-- WRITE_RELEASE_MESSAGE after a writer — or other holds remain), 2 when a reentrant hold
-- remains (Redisson clients), 3 when the lock was handed to waiters.
-- The owner's count and record in one call; whether anyone waits; and, for a last hold,
-- how many fields the hash has (3 — mode, count, record — when it is the only hold).
local state = redis.call('hmget', key, owner, HOLDER_FIELD .. ':' .. owner)
local count = state[1]
local queued = redis.call('exists', queue) == 1
local size = count == '1' and redis.call('hlen', key) or 0
local writer = string.sub(owner, -6) == ':write'
-- The uncontended path first: the only hold ends and nobody is queued.
if size == 3 and not queued then
  redis.call('del', key)
  if writer then
    redis.call(publish, CHANNEL_PREFIX .. '{' .. key .. '}', WRITE_RELEASE_MESSAGE)
  else
    redis.call('del', '{' .. key .. '}:' .. owner .. ':rwlock_timeout:1')
    redis.call(publish, CHANNEL_PREFIX .. '{' .. key .. '}', RELEASE_MESSAGE)
  end
  return 1
end
-- @prelude
local floor = token_of(state[2])
if size == 3 then
  -- The only hold ends, with waiters queued: the hand-off, first, with only its own helpers
  -- defined.
  if not writer then
    redis.call('del', timeout_key(owner, 1))
  end
  return hand_over(redis.call('time'), floor, writer)
end
-- @prelude
local holds_now = tonumber(count or '0')
if holds_now <= 0 then
  if meta then
    dequeue(member(lease_ms, owner, meta))
  end
  return 0
end
if holds_now > 1 then
  redis.call('hincrby', key, owner, '-1')
  if not writer then
    redis.call('del', timeout_key(owner, holds_now))
  end
  return 2
end
-- One hold of several ends.
if not writer then
  redis.call('del', timeout_key(owner, 1))
end
redis.call('hdel', key, owner, record_field(owner))
if not writer and not queued then
  -- Other holds remain and nobody waits: nothing to hand on, no need to read every hold
  -- (dead readers go with the hash's TTL, or at the next contended call).
  return 1
end
local t = redis.call('time')
local readers, writers, top = holds()
floor = math.max(top, floor)
if prune_readers(readers, writers) then
  local reading = next(writers) == nil
  if reading then
    -- A writer's own read holds (Redisson's) remain: the lock is now read-locked.
    redis.call('hset', key, 'mode', 'read')
  end
  grant_waiting(t, floor, '', publish, false, reading)
  return 1
end
-- Every other holder died: nobody holds it now.
return hand_over(t, floor, writer)
