-- FORCE_RELEASE: deletes the lock whoever holds it, and its holder record, then hands it to
-- the next waiter or publishes RELEASE_MESSAGE.
-- KEYS: key, fence, queue, deadlines, holder, channel (all six).
-- ARGV: publish ('publish' or 'spublish').
-- Returns 0 when there was no lock, 1 when it was deleted, 2 when it was deleted and handed
-- to a waiter.
local publish = ARGV[1]
if redis.call('exists', key) == 0 then
  return 0
end
redis.call('del', key, holder)
if redis.call('zcard', queue) > 0 and grant_next({now = now_ms(), skip = '', publish = publish}) then
  return 2
end
redis.call(publish, channel, RELEASE_MESSAGE)
return 1
