-- RELEASE: releases an owner's hold, or takes its entry out of the queue.
-- KEYS: key, fence, queue, deadlines, holder, channel (all six).
-- ARGV: owner, lease_ms, meta (the holder metadata its acquisition sent, which makes its
--       queue member), publish ('publish' or 'spublish').
-- Returns 0 when the owner holds nothing (it only leaves the queue), 1 when the lock was
-- deleted and RELEASE_MESSAGE published, 2 when a reentrant hold remains (Redisson
-- clients), 3 when the lock was handed to the next waiter.
local owner = ARGV[1]
local lease_ms = ARGV[2]
local meta = ARGV[3]
local publish = ARGV[4]
local count = tonumber(redis.call('hget', key, owner) or '0')
if count <= 0 then
  local me = member(lease_ms, owner, meta)
  redis.call('zrem', queue, me)
  redis.call('zrem', deadlines, me)
  return 0
end
if count > 1 then
  redis.call('hincrby', key, owner, -1)
  redis.call('pexpire', key, lease_ms)
  redis.call('pexpire', holder, lease_ms)
  return 2
end
redis.call('del', key, holder)
if redis.call('zcard', queue) > 0 and grant_next({now = now_ms(), skip = '', publish = publish}) then
  return 3
end
redis.call(publish, channel, RELEASE_MESSAGE)
return 1
