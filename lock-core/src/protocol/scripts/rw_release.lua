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
-- The owner's count and record in one call; for a last hold, how many fields the hash has
-- (3 — mode, count, record — when it is the only hold).
local state = redis.call('hmget', key, owner, HOLDER_FIELD .. ':' .. owner)
local count = state[1]
local size = count == '1' and redis.call('hlen', key) or 0
local writer = string.sub(owner, -6) == ':write'
if size == 3 then
  -- The only hold ends. The uncontended path is the first pop finding nobody queued; else
  -- the popped waiter is the hand-off's first candidate.
  redis.call('del', key)
  if not writer then
    redis.call('del', '{' .. key .. '}:' .. owner .. ':rwlock_timeout:1')
  end
  local popped = redis.call('zpopmin', queue)
  local head = popped[1]
  if not head then
    redis.call(publish, CHANNEL_PREFIX .. '{' .. key .. '}',
      writer and WRITE_RELEASE_MESSAGE or RELEASE_MESSAGE)
    return 1
  end
  local t = redis.call('time')
  -- A writer at the head that queued less than WAITER_TTL_MIN ago (alive: see `alive`)
  -- gets the free lock inline, as the exclusive lock's hand-off does (it runs once per
  -- contended acquisition): the prelude's `grant_waiting` and `grant_side` for one writer.
  -- Any other head takes the prelude's way.
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local its_lease, its_owner, its_client, its_meta =
    string.match(head, '^(%d+)|(([^|:]*)[^|]*:write)|(.*)$')
  if its_owner and now < math.floor(tonumber(popped[2]) / 1000) + WAITER_TTL_MIN then
    redis.call('zrem', queue, '~' .. head)
    local previous = state[2]
    -- @inline handoff_token
    local record = token .. '\31' .. its_owner
    if its_meta ~= '' then record = record .. '\31' .. its_meta end
    redis.call('hset', key, 'mode', 'write', its_owner, '1', HOLDER_FIELD .. ':' .. its_owner, record)
    redis.call('pexpire', key, its_lease)
    redis.call(publish, GRANTS_PREFIX .. '{' .. key .. '}:' .. its_client,
      GRANT_PREFIX .. its_owner .. ':' .. token)
    return 3
  end
-- @prelude: this block
  return hand_over(t, token_of(state[2]), writer, popped)
end
-- @prelude
local floor = token_of(state[2])
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
local queued = redis.call('exists', queue) == 1
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
redis.call('del', key)
return hand_over(t, floor, writer)
