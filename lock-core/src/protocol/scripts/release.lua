-- RELEASE: releases an owner's hold, or takes its entry out of the queue.
-- KEYS: key, queue, and fence under Redlock only.
-- ARGV: owner, lease_ms, publish ('publish' or 'spublish'), and meta (the holder metadata
--       its acquisition sent, which makes its queue member) only when the owner may still
--       be queued (an acquisition dropped while it waited).
-- Returns 0 when the owner holds nothing (it only leaves the queue), 1 when the lock was
-- deleted and RELEASE_MESSAGE published, 2 when a reentrant hold remains (Redisson
-- clients), 3 when the lock was handed to the next waiter.
-- The owner's count and the record (the hand-off's token floor) in one call.
local held = redis.call('hmget', key, owner, HOLDER_FIELD)
local holds = tonumber(held[1] or '0')
if holds == 1 then
  -- The last hold ends: the uncontended path (nobody queued) is the first pop finding
  -- nothing; else the popped waiter is the hand-off's first candidate.
  redis.call('del', key)
  local head = redis.call('zpopmin', queue)[1]
  if not head then
    redis.call(publish, CHANNEL_PREFIX .. '{' .. key .. '}', RELEASE_MESSAGE)
    return 1
  end
-- @prelude
  local floor = floor_of(token_of(held[2]))
  if grant_next(redis.call('time'), floor, '', publish, head) then
    return 3
  end
  redis.call(publish, channel(), RELEASE_MESSAGE)
  return 1
end
if holds <= 0 then
  if meta then
    local me = lease_ms .. '|' .. owner .. '|' .. meta
    redis.call('zrem', queue, me, '~' .. me)
  end
  return 0
end
redis.call('hincrby', key, owner, -1)
redis.call('pexpire', key, lease_ms)
return 2
