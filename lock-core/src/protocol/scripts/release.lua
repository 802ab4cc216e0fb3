-- RELEASE: releases an owner's hold, or takes its entry out of the queue.
-- KEYS: key, queue, deadlines, and fence under Redlock only.
-- ARGV: owner, lease_ms, publish ('publish' or 'spublish'), and meta (the holder metadata
--       its acquisition sent, which makes its queue member) only when the owner may still
--       be queued (an acquisition dropped while it waited).
-- Returns 0 when the owner holds nothing (it only leaves the queue), 1 when the lock was
-- deleted and RELEASE_MESSAGE published, 2 when a reentrant hold remains (Redisson
-- clients), 3 when the lock was handed to the next waiter.
local count = redis.call('hget', key, owner)
-- The uncontended path first: the last hold ends and nobody is queued.
if count == '1' and redis.call('exists', queue) == 0 then
  redis.call('del', key)
  redis.call(publish, CHANNEL_PREFIX .. '{' .. key .. '}', RELEASE_MESSAGE)
  return 1
end
-- @prelude
local holds = tonumber(count or '0')
if holds <= 0 then
  if meta then
    local me = member(lease_ms, owner, meta)
    redis.call('zrem', queue, me)
    redis.call('zrem', deadlines, me)
  end
  return 0
end
if holds > 1 then
  redis.call('hincrby', key, owner, -1)
  redis.call('pexpire', key, lease_ms)
  return 2
end
local floor = floor_of(token_of(redis.call('hget', key, HOLDER_FIELD)))
redis.call('del', key)
if grant_next({t = redis.call('time'), floor = floor, skip = '', publish = publish}) then
  return 3
end
redis.call(publish, channel(), RELEASE_MESSAGE)
return 1
