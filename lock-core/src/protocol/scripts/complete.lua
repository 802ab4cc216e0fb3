-- COMPLETE: stores an idempotency record and releases its in-flight hold, in one step, and
-- only while the hold is still the one its caller was granted.
-- KEYS: key, queue, record. The record takes the third place, Redlock's fence:
--       records are not kept under Redlock (refused before any call), so there is no fence.
-- ARGV: owner, token (the hold's fencing token), lease_ms, publish ('publish' or
--       'spublish'), value (the record), retention_ms (its TTL).
-- Returns 0 when `owner` no longer holds the lock with `token` (its lease ran out, or it
-- was taken over): nothing is stored and nothing released. Else the record is stored and
-- the hold released as RELEASE does: 1 deleted and RELEASE_MESSAGE published, 2 a
-- reentrant hold remains, 3 handed to the next waiter.
local record = fence
fence = nil
local value, retention_ms = ARGV[5], ARGV[6]
-- @prelude
local count = tonumber(redis.call('hget', key, owner) or '0')
local current = token_of(redis.call('hget', key, HOLDER_FIELD))
if count <= 0 or current ~= tonumber(token) then
  return 0
end
redis.call('set', record, value, 'px', retention_ms)
-- The usual case: the last hold ends and nobody waits (an idempotent request never queues).
if count == 1 and redis.call('exists', queue) == 0 then
  redis.call('del', key)
  redis.call(publish, channel(), RELEASE_MESSAGE)
  return 1
end
if count > 1 then
  redis.call('hincrby', key, owner, '-1')
  redis.call('pexpire', key, lease_ms)
  return 2
end
redis.call('del', key)
if grant_next(redis.call('time'), floor_of(current), '', publish) then
  return 3
end
redis.call(publish, channel(), RELEASE_MESSAGE)
return 1
