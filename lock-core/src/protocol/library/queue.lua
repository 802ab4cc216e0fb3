------------------------------------------------------------------------------------------
-- The fair queue and its hand-offs, for every kind: waiters' members, their liveness, and
-- the grant a hand-off publishes to the waiter it picks.

-- Tells waiter `owner` that it holds the lock `key` now, with `token` (text). Only on its
-- client's grants channel (the client id is the owner's text before its first ':'), so no
-- other process waiting here hears it. False, with nothing published, when nobody listens
-- there: the waiter's client is gone, and the caller skips it. Counted before publishing,
-- not by PUBLISH's answer: a message this server publishes also reaches the listeners of
-- its replicas, so a waiter still listening on a demoted master would hear a grant that
-- was never written.
local function publish_grant(publish, key, owner, token)
  local grants = GRANTS_PREFIX .. '{' .. key .. '}:' .. string.match(owner, '^[^:]*')
  if not (on_cluster and publish == 'publish') then
    local count = publish == 'spublish' and 'shardnumsub' or 'numsub'
    if redis.call('pubsub', count, grants)[2] == 0 then return false end
  end
  redis.call(publish, grants, GRANT_PREFIX .. owner .. ':' .. token)
  return true
end
-- The TTL of a hold granted by message: the waiter's lease (text), at most CLAIM_MS. Its
-- client extends it to the lease when the grant reaches it.
local function claim_of(lease_ms)
  return math.min(tonumber(lease_ms), CLAIM_MS)
end
-- A waiter's queue member (see the top of common.lua).
local function member(lease_ms, owner, meta)
  return lease_ms .. '|' .. owner .. '|' .. meta
end
-- The lease (text), owner and metadata of a queue member, or nil when it is no member of
-- these kinds (a member without metadata is accepted).
local function parse_member(m)
  return string.match(m, '^(%d+)|([^|]*)|?(.*)$')
end
-- Queues waiter `me` at Redis time `t`, or refreshes it, alive for `waiter_ttl_ms` (as sent;
-- 0: the caller does not queue), WAITER_TTL_MIN at least (see `recent`); the queue lives
-- as long as its last waiter.
local function enqueue(queue, me, t, waiter_ttl_ms)
  local ms, expiry = tonumber(waiter_ttl_ms), waiter_ttl_ms
  if ms <= 0 then return end
  if ms < WAITER_TTL_MIN then
    ms, expiry = WAITER_TTL_MIN, string.format('%d', WAITER_TTL_MIN)
  end
  redis.call('zadd', queue, 'LT', micros_text(t), me,
    string.format('%d', LIVE_BASE - ms_of(t) - ms), '~' .. me)
  redis.call('pexpire', queue, expiry)
end
-- Takes waiter `me` out of the queue.
local function dequeue(queue, me)
  redis.call('zrem', queue, me, '~' .. me)
end
-- True when a waiter that arrived at `arrival` (its score: µs, as text) is alive at `now`
-- (ms) without reading its deadline: it queued less than WAITER_TTL_MIN ago, every queueing
-- lasts at least that long, and a refresh only moves the deadline later.
local function recent(now, arrival)
  return now < math.floor(tonumber(arrival) / 1000) + WAITER_TTL_MIN
end
-- True when the deadline of the queued waiter `m` has not passed at `now` (ms).
local function live_at(queue, m, now)
  local live = redis.call('zscore', queue, '~' .. m)
  return live and LIVE_BASE - tonumber(live) > now
end
-- True when the waiter `head`, just taken off the queue, was alive at `now` (ms); its
-- deadline goes too. `arrival`: its score, when the caller read it (see `recent`).
local function alive(queue, head, now, arrival)
  local live = (arrival and recent(now, arrival)) or live_at(queue, head, now)
  redis.call('zrem', queue, '~' .. head)
  return live
end
