-- FORCE_RELEASE: deletes the lock whoever holds it (its holder record goes with it), then
-- hands it to the next waiter or publishes RELEASE_MESSAGE.
-- KEYS: key, queue, and fence under Redlock only.
-- ARGV: publish ('publish' or 'spublish').
-- Returns 0 when there was no lock, 1 when it was deleted, 2 when it was deleted and handed
-- to a waiter.
-- @prelude
if redis.call('exists', key) == 0 then
  return 0
end
local floor = floor_of(token_of(redis.call('hget', key, HOLDER_FIELD)))
redis.call('del', key)
if grant_next(redis.call('time'), floor, '', publish) then
  return 2
end
redis.call(publish, channel(), RELEASE_MESSAGE)
return 1
