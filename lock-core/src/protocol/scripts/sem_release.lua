-- SEM_RELEASE: gives an owner's permit back, or takes its entry out of the queue.
-- KEYS: key (holders by expiry), queue, holders (records).
-- ARGV: owner, lease_ms, publish ('publish' or 'spublish'), capacity (the caller's
--       permits), and meta (the holder metadata its acquisition sent) only when the owner
--       may still be queued. lease_ms, capacity and meta make its queue member.
-- Returns 0 when the owner held no permit (it only leaves the queue), 1 when the permit was
-- given back and RELEASE_MESSAGE published, 3 when it was handed to waiters.
-- The permit back, and the queue's head taken off (none: nobody waits, so nobody listens
-- either — the uncontended path; else the hand-off's first candidate).
local removed = redis.call('zrem', key, owner)
local head = removed == 1 and redis.call('zpopmin', queue) or {}
if removed == 1 and not head[1] then
  redis.call('hdel', holders, owner)
  return 1
end
-- @prelude
if removed == 1 then
  -- The hand-off.
  redis.call('hdel', holders, owner)
  local t = redis.call('time')
  local now = ms_of(t)
  local held = redis.call('zcard', key)
  if held > 0 and prune(now, redis.call('zrange', key, '0', '0', 'WITHSCORES')) then
    held = redis.call('zcard', key)
  end
  local _, granted, _, longest = grant_waiting(t, '', publish, held, head)
  if granted == 0 then
    redis.call(publish, channel(), RELEASE_MESSAGE)
    return 1
  end
  if held == 0 then
    -- Both keys went with the last permit: the grants made them afresh.
    local ttl = string.format('%d', longest)
    redis.call('pexpire', key, ttl)
    redis.call('pexpire', holders, ttl)
  else
    expire_at_latest(now)
  end
  return 3
end
-- @prelude
if meta then
  dequeue(sem_member(lease_ms, capacity, owner, meta))
end
return 0
