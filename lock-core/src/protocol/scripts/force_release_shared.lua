-- FORCE_RELEASE of a read-write lock or a semaphore: deletes it whoever holds it (with a
-- semaphore's records), then publishes RELEASE_MESSAGE on its channel: its queued waiters
-- retry at once and are granted in their order. (Readers' timeout keys expire with their
-- lease.)
-- KEYS: key, queue, and a semaphore's holders.
-- ARGV: publish ('publish' or 'spublish').
-- Returns 0 when there was nothing to delete, 1 when it was deleted.
if redis.call('exists', key) == 0 then
  return 0
end
redis.call('del', key)
if holders then
  redis.call('del', holders)
end
redis.call(publish, CHANNEL_PREFIX .. '{' .. key .. '}', RELEASE_MESSAGE)
return 1
