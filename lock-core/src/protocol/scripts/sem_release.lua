-- SEM_RELEASE: gives an owner's permit back, or takes its entry out of the queue.
-- KEYS: key (holders by expiry), queue, holders (records).
-- ARGV: owner, lease_ms, publish ('publish' or 'spublish'), capacity (the caller's
--       permits), and meta (the holder metadata its acquisition sent) only when the owner
--       may still be queued. lease_ms, capacity and meta make its queue member.
-- Returns 0 when the owner held no permit (it only leaves the queue), 1 when the permit was
-- given back and RELEASE_MESSAGE published, 3 when it was handed to waiters.
-- The permit back, and the queue's first two read (none: nobody waits, so nobody listens
-- either — the uncontended path; else the head is the hand-off's first candidate, and the
-- one behind it says whether a second grant could follow).
local removed = redis.call('zrem', key, owner)
if removed == 1 then
  local heads = redis.call('zrange', queue, '0', '1', 'WITHSCORES')
  redis.call('hdel', holders, owner)
  if not heads[1] then
    return 1
  end
  local t = redis.call('time')
  local held = redis.call('zcard', key)
  -- The first permit to expire, while permits remain: none has expired if it has not.
  local first = held > 0 and redis.call('zrange', key, '0', '0', 'WITHSCORES')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  -- No permit expired, and the head fits, queued less than WAITER_TTL_MIN ago (alive: see
  -- `alive`), and is the only one that fits (the next, if any, needs more permits free
  -- than will be): the head gets its permit inline, as the exclusive lock's hand-off does
  -- (it runs once per contended acquisition) — the prelude's `grant_waiting` and `give`
  -- for one waiter. Any other case takes the prelude's way, which prunes dead permits.
  local head = heads[1]
  local its_lease, its_capacity, its_owner, its_client, its_meta =
    string.match(head, '^(%d+):(%d+)|(([^|:]*)[^|]*)|(.*)$')
  local next_capacity = heads[3] and tonumber(string.match(heads[3], '^%d+:(%d+)|') or '0')
  if its_owner and held < tonumber(its_capacity) and not (first and tonumber(first[2]) <= now)
      and now < math.floor(tonumber(heads[2]) / 1000) + WAITER_TTL_MIN
      and not (next_capacity and next_capacity > held + 1) then
    redis.call('zrem', queue, head, '~' .. head)
    local token = t[1] .. string.sub('00000' .. t[2], -6)
    local record = token .. '\31' .. its_owner
    if its_meta ~= '' then record = record .. '\31' .. its_meta end
    redis.call('zadd', key, string.format('%d', now + tonumber(its_lease)), its_owner)
    redis.call('hset', holders, its_owner, record)
    redis.call(publish, GRANTS_PREFIX .. '{' .. key .. '}:' .. its_client,
      GRANT_PREFIX .. its_owner .. ':' .. token)
    -- Both keys live until the latest permit's expiry: this one's, unless a permit held
    -- lasts longer. With none held, both went with the last one: the grant made them afresh.
    if held == 0 or redis.call('pttl', key) < tonumber(its_lease) then
      redis.call('pexpire', key, its_lease)
      redis.call('pexpire', holders, its_lease)
    end
    return 3
  end
-- @prelude: this block
  if held > 0 and prune(now, first) then
    held = redis.call('zcard', key)
  end
  local _, granted, _, longest = grant_waiting(t, '', publish, held, heads)
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
