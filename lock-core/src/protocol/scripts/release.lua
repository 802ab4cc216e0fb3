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
  local popped = redis.call('zpopmin', queue)
  local head = popped[1]
  if not head then
    redis.call(publish, CHANNEL_PREFIX .. '{' .. key .. '}', RELEASE_MESSAGE)
    return 1
  end
  local t = redis.call('time')
  -- The hand-off, inline as the busy path is (it runs once per contended acquisition): the
  -- prelude's `grant_next` for a head that queued less than WAITER_TTL_MIN ago (alive: see
  -- `alive`), with no fence floor to read. Any other head takes the prelude's way.
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local its_lease, its_owner, its_client, its_meta =
    string.match(head, '^(%d+)|(([^|:]*)[^|]*)|?(.*)$')
  if its_owner and not fence and now < math.floor(tonumber(popped[2]) / 1000) + WAITER_TTL_MIN then
    redis.call('zrem', queue, '~' .. head)
    local previous = held[2]
    -- @inline handoff_token
    local record = token .. '\31' .. its_owner
    if its_meta ~= '' then record = record .. '\31' .. its_meta end
    redis.call('hset', key, its_owner, '1', HOLDER_FIELD, record)
    redis.call('pexpire', key, its_lease)
    redis.call(publish, GRANTS_PREFIX .. '{' .. key .. '}:' .. its_client,
      GRANT_PREFIX .. its_owner .. ':' .. token)
    return 3
  end
-- @prelude: this block
  local floor = floor_of(token_of(held[2]))
  if grant_next(t, floor, '', publish, head, popped[2]) then
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
redis.call('hincrby', key, owner, '-1')
redis.call('pexpire', key, lease_ms)
return 2
