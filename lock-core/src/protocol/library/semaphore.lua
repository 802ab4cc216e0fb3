------------------------------------------------------------------------------------------
-- Semaphores: `key` is a ZSET of holder owner -> expiry (ms, Redis clock) and `holders` a
-- hash of owner -> holder record; both expire with the latest permit. A waiter's queue
-- member is `<lease ms>:<capacity>|<owner>|<meta>`: a hand-off checks the waiter's own
-- capacity. Releases are published on distlock's own channel.

local function sem_member(lease_ms, capacity, owner, meta)
  return lease_ms .. ':' .. capacity .. '|' .. owner .. '|' .. meta
end
-- The lease (text), capacity (text), owner and metadata of a semaphore's queue member, or
-- nil when it is none (see `parse_member`).
local function parse_sem_member(m)
  return string.match(m, '^(%d+):(%d+)|([^|]*)|?(.*)$')
end
-- The capacity (text) of a semaphore's queue member, or nil: `parse_sem_member`'s second
-- field alone, without copying out the rest.
local function sem_capacity(m)
  return string.match(m, '^%d+:(%d+)|')
end
-- True when the first permit to expire, `first` (a ZRANGE 0 0 WITHSCORES answer, or false
-- for none), has expired at `now`.
local function expired(first, now)
  return first and first[2] and tonumber(first[2]) <= now
end
-- Drops the permits whose expiry has passed (their holders died or lost them) when the
-- first to expire, `first`, has (see `expired`); true when any went.
local function prune(key, holders, now, first)
  if not expired(first, now) then return false end
  local dead = redis.call('zrangebyscore', key, '-inf', string.format('%d', now))
  for _, owner in ipairs(dead) do
    redis.call('zrem', key, owner)
    redis.call('hdel', holders, owner)
  end
  return true
end
-- Keeps both keys for `ttl` ms (text or number).
local function expire_both(key, holders, ttl)
  redis.call('pexpire', key, ttl)
  redis.call('pexpire', holders, ttl)
end
-- Keeps both keys until the latest permit's expiry.
local function expire_at_latest(key, holders, now)
  local last = redis.call('zrange', key, '-1', '-1', 'WITHSCORES')
  if last[2] then
    expire_both(key, holders, string.format('%d', tonumber(last[2]) - now))
  end
end
-- Gives `owner` a permit until `now` (ms, the Redis clock) + `ttl_ms`, with `token` (text).
local function give(key, holders, owner, meta, ttl_ms, now, token)
  redis.call('zadd', key, string.format('%d', now + tonumber(ttl_ms)), owner)
  redis.call('hset', holders, owner, record_of(token, owner, meta))
end
-- Grants permits to the waiters at the head of the queue, in arrival order (with rising
-- tokens), while fewer than the head's own capacity are held (`held` of them now, counted
-- here as permits are given); drops the dead waiters it takes (and those whose client does
-- not hear the grant). It stops at a head that does not fit, alive or not: a deadline is
-- read only for a waiter that would be granted (a dead head goes at a later hand-off).
-- Publishes each grant, with a claim, unless the grantee is the member `skip` (its lease).
-- `first`: the queue's head {member, arrival, …} when the caller already read it (still
-- queued), else nil. Returns the token granted to `skip` (or nil), how many were
-- granted, whether a waiter is left, and the longest lease given (ms, 0 for none).
local function sem_grant_waiting(key, queue, holders, t, skip, publish, held, first)
  local now = ms_of(t)
  local token_of_skip, granted, last, longest = nil, 0, 0, 0
  for _ = 1, 64 do
    local head = first or redis.call('zrange', queue, '0', '0', 'WITHSCORES')
    first = nil
    local m = head[1]
    if not m then return token_of_skip, granted, false, longest end
    local lease_ms, capacity, owner, meta = parse_sem_member(m)
    if capacity and held >= tonumber(capacity) then
      return token_of_skip, granted, true, longest
    end
    redis.call('zrem', queue, m)
    if alive(queue, m, now, head[2]) and capacity then
      local token, ttl = token_at(t, last), tonumber(lease_ms)
      local text = text_of(token)
      if m == skip then
        token_of_skip = token
      elseif publish_grant(publish, key, owner, text) then
        ttl = claim_of(lease_ms)
      else
        token = nil
      end
      if token then
        give(key, holders, owner, meta, ttl, now, text)
        granted, last, held = granted + 1, token, held + 1
        longest = math.max(longest, ttl)
      end
    end
  end
  return token_of_skip, granted, true, longest
end
-- The busy answer: the time until the first permit expires (`first`, a ZRANGE 0 0
-- WITHSCORES answer), 0, and its holder's record.
local function sem_busy(holders, now, first)
  if not first[1] then return {0, 0, 0} end
  return {0, tonumber(first[2]) - now, 0, redis.call('hget', holders, first[1])}
end

-- SEM_ACQUIRE: gives an owner one permit of a semaphore, or queues it as a waiter. A permit
-- is granted while fewer than the caller's capacity are held and no live waiter is queued
-- before it. Returns {1, token} when this owner holds a permit (fresh, handed to it, or
-- already its own), else {0, ms until the first permit expires, 0, that holder's record or
-- nil} after queueing the caller.
local function sem_acquire(keys, args)
  local key, queue, holders = keys[1], keys[2], keys[3]
  local lease_ms, owner, meta, waiter_ttl_ms, publish, capacity =
    args[1], args[2], args[3], args[4], args[5], args[6]
  -- The uncontended path first: no permit held and nobody queued costs six calls.
  if redis.call('exists', key, queue) == 0 then
    local t = redis.call('time')
    local token = micros_text(t)
    give(key, holders, owner, meta, lease_ms, ms_of(t), token)
    expire_both(key, holders, lease_ms)
    return {1, tonumber(token)}
  end
  local t = redis.call('time')
  local now = ms_of(t)
  local me = sem_member(lease_ms, capacity, owner, meta)
  -- The first permit to expire: whether any died, and the busy answer's.
  local first = redis.call('zrange', key, '0', '0', 'WITHSCORES')
  local held, mine
  if not expired(first, now) then
    -- No permit expired. The busy path: the caller holds no permit and does not fit, and
    -- every change of the holds ran the hand-off, so nobody queued fits either. With one
    -- permit, a first holder is all it takes to be full (no ZCARD); `held` is then a lower
    -- bound, which the code below only compares with the caller's capacity of 1.
    if first[1] and capacity == '1' then
      held = 1
    else
      held = redis.call('zcard', key)
    end
    if held >= tonumber(capacity) then
      -- Whether the caller holds a permit (every permit has its record), and the busy
      -- answer's record, in one call.
      local records = redis.call('hmget', holders, owner, first[1])
      mine = records[1]
      if not mine then
        enqueue(queue, me, t, waiter_ttl_ms)
        return {0, tonumber(first[2]) - now, 0, records[2]}
      end
    end
  end
  local changed = prune(key, holders, now, first)
  if changed then
    held = nil
  end
  if mine == nil then
    mine = redis.call('zscore', key, owner)
  end
  if mine then
    -- Already ours (a retry after a lost reply): its expiry moves on, never back.
    redis.call('zadd', key, 'GT', string.format('%d', now + tonumber(lease_ms)), owner)
    expire_at_latest(key, holders, now)
    return {1, token_of(redis.call('hget', holders, owner))}
  end
  held = held or redis.call('zcard', key)
  -- As on the busy path above: unless permits just expired, nobody queued fits while the
  -- caller does not.
  local token, granted, waiting = nil, 0, true
  if changed or held < tonumber(capacity) then
    token, granted, waiting = sem_grant_waiting(key, queue, holders, t, me, publish, held)
  end
  if not token and not waiting and held + granted < tonumber(capacity) then
    token = token_at(t, 0)
    give(key, holders, owner, meta, lease_ms, now, text_of(token))
  end
  if changed or granted > 0 or token then
    expire_at_latest(key, holders, now)
  end
  if token then
    return {1, token}
  end
  enqueue(queue, me, t, waiter_ttl_ms)
  if changed or granted > 0 then
    first = redis.call('zrange', key, '0', '0', 'WITHSCORES')
  end
  return sem_busy(holders, now, first)
end

-- SEM_RELEASE: gives an owner's permit back, or (with `meta`) takes its entry out of the
-- queue; lease_ms, capacity and meta make its queue member. Answers NOT_HELD when the
-- owner held no permit (it only leaves the queue), RELEASED when the permit was given back
-- and RELEASE_MESSAGE published, HANDED_OVER when it was handed to waiters.
local function sem_release(keys, args)
  local key, queue, holders = keys[1], keys[2], keys[3]
  local owner, lease_ms, publish, capacity, meta = args[1], args[2], args[3], args[4], args[5]
  if redis.call('zrem', key, owner) == 0 then
    if meta then
      dequeue(queue, sem_member(lease_ms, capacity, owner, meta))
    end
    return NOT_HELD
  end
  -- The queue's first two (none: nobody waits, so nobody listens either — the uncontended
  -- path; else the head is the hand-off's first candidate, and the one behind it says
  -- whether a second grant could follow).
  local heads = redis.call('zrange', queue, '0', '1', 'WITHSCORES')
  redis.call('hdel', holders, owner)
  if not heads[1] then
    return RELEASED
  end
  local t = redis.call('time')
  local held = redis.call('zcard', key)
  -- The first permit to expire, while permits remain: none has expired if it has not.
  local first = held > 0 and redis.call('zrange', key, '0', '0', 'WITHSCORES')
  local now = ms_of(t)
  -- The common hand-off: no permit expired, and the head fits, is recent (alive: see
  -- `recent`), and is the only one that fits (the next, if any, needs more permits free
  -- than will be).
  local head = heads[1]
  local its_lease, its_capacity, its_owner, its_meta = parse_sem_member(head)
  local next_capacity = heads[3] and sem_capacity(heads[3])
  if its_owner and held < tonumber(its_capacity) and not expired(first, now)
      and recent(now, heads[2])
      and not (next_capacity and tonumber(next_capacity) > held + 1) then
    redis.call('zrem', queue, head, '~' .. head)
    -- No previous holder's token to exceed: each permit's token is the clock.
    local token = micros_text(t)
    if publish_grant(publish, key, its_owner, token) then
      local claim = claim_of(its_lease)
      give(key, holders, its_owner, its_meta, claim, now, token)
      -- Both keys live until the latest permit's expiry: this one's, unless a permit held
      -- lasts longer. With none held, both went with the last one: the grant made them
      -- afresh.
      if held == 0 or redis.call('pttl', key) < claim then
        expire_both(key, holders, claim)
      end
      return HANDED_OVER
    end
    -- Its client is gone: the next live waiters' turn.
    heads = nil
  end
  if held > 0 and prune(key, holders, now, first) then
    held = redis.call('zcard', key)
  end
  local _, granted, _, longest =
    sem_grant_waiting(key, queue, holders, t, '', publish, held, heads)
  if granted == 0 then
    redis.call(publish, channel(SEMAPHORE_CHANNEL, key), RELEASE_MESSAGE)
    return RELEASED
  end
  if held == 0 then
    -- Both keys went with the last permit: the grants made them afresh.
    expire_both(key, holders, string.format('%d', longest))
  else
    expire_at_latest(key, holders, now)
  end
  return HANDED_OVER
end

-- SEM_TOUCH: writes the semaphore again (see TOUCH); the permit keeps the expiry it was
-- granted. Returns the permit's remaining ms, or 0 when the owner holds no live permit.
local function sem_touch(keys, args)
  local key = keys[1]
  local owner = args[1]
  local now = ms_of(redis.call('time'))
  local left = tonumber(redis.call('zscore', key, owner) or '0') - now
  if left <= 0 then return 0 end
  redis.call('pexpire', key, math.max(redis.call('pttl', key), left))
  return left
end

-- SEM_FORCE_RELEASE: see force_release_shared.
local function sem_force_release(keys, args)
  return force_release_shared(SEMAPHORE_CHANNEL, keys[1], keys[3], args[1])
end
