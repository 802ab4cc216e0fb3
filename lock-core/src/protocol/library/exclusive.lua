------------------------------------------------------------------------------------------
-- The exclusive lock: Redisson's RLock.

-- Takes the (free) lock `key` for `owner` with `token` (text) for `ttl_ms`.
local function grant(key, owner, meta, ttl_ms, token)
  redis.call('hset', key, owner, '1', HOLDER_FIELD, record_of(token, owner, meta))
  redis.call('pexpire', key, ttl_ms)
end
-- Grants the (free) lock to the first waiter whose deadline has not passed and whose client
-- hears the grant, dropping the others: `t` the Redis clock, `floor` the lowest token the
-- grant must exceed, `skip` the queue member that is the caller (granted its lease, with no
-- message; '' for none), `head` and `arrival` the queue's first member and its score when
-- the caller already popped it (else nil). Returns member, token (a number) or nil.
local function grant_next(key, queue, t, floor, skip, publish, head, arrival)
  local now = ms_of(t)
  for _ = 1, 64 do
    if not head then
      local popped = redis.call('zpopmin', queue)
      head, arrival = popped[1], popped[2]
      if not head then return nil end
    end
    if alive(queue, head, now, arrival) then
      local lease_ms, owner, meta = parse_member(head)
      local token = token_at(t, floor)
      local text = text_of(token)
      if head == skip then
        grant(key, owner, meta, lease_ms, text)
        return head, token
      end
      if publish_grant(publish, key, owner, text) then
        grant(key, owner, meta, claim_of(lease_ms), text)
        return head, token
      end
    end
    head = nil
  end
  return nil
end
-- Ends a hold of the lock whose record is `previous` (or nil): one of `owner`'s `count`
-- (> 0) holds, or every hold when `count` is nil (a force release). While a reentrant
-- hold remains (Redisson clients) its lease is set again; else the hash goes (the record
-- with it) and the lock is handed on to the first live waiter whose client hears the
-- grant, with a token above `previous`'s and `fence` (Redlock's fence floor, or nil), or
-- its release is published. The uncontended path is the first pop finding nobody queued;
-- else the popped waiter is the hand-off's first candidate. Answers STILL_HELD,
-- HANDED_OVER or RELEASED.
local function end_hold(key, queue, fence, previous, publish, owner, count, lease_ms)
  if count and count > 1 then
    redis.call('hincrby', key, owner, '-1')
    redis.call('pexpire', key, lease_ms)
    return STILL_HELD
  end
  redis.call('del', key)
  local popped = redis.call('zpopmin', queue)
  local head, arrival = popped[1], popped[2]
  if not head then
    redis.call(publish, channel(LOCK_CHANNEL, key), RELEASE_MESSAGE)
    return RELEASED
  end
  local t = redis.call('time')
  -- The common hand-off: a recent head, and without a fence floor to read (`grant`
  -- written out, as on the uncontended path of ACQUIRE).
  local its_lease, its_owner, its_meta = parse_member(head)
  if its_owner and not fence and recent(ms_of(t), arrival) then
    redis.call('zrem', queue, '~' .. head)
    local token = handoff_token(t, previous)
    if publish_grant(publish, key, its_owner, token) then
      redis.call('hset', key, its_owner, '1', HOLDER_FIELD,
        record_of(token, its_owner, its_meta))
      redis.call('pexpire', key, claim_of(its_lease))
      return HANDED_OVER
    end
    -- Its client is gone: the next live waiter's turn.
    head = nil
  end
  local floor = floor_of(fence, token_of(previous))
  if grant_next(key, queue, t, floor, '', publish, head, arrival) then
    return HANDED_OVER
  end
  redis.call(publish, channel(LOCK_CHANNEL, key), RELEASE_MESSAGE)
  return RELEASED
end

-- ACQUIRE: takes the lock for an owner, or queues the owner as a waiter.
-- Returns {1, token} when this owner holds the lock (fresh, handed to it, or already its
-- own — acquiring is idempotent, so a retry after a lost reply is safe), else
-- {0, pttl, 0, the holder's record or nil} after queueing the caller.
local function acquire(keys, args)
  local key, queue, fence = keys[1], keys[2], keys[3]
  local lease_ms, owner, meta, waiter_ttl_ms, publish = args[1], args[2], args[3], args[4], args[5]
  local present = redis.call('exists', key, queue)
  -- The uncontended path first: a free lock with nobody queued costs four calls (and
  -- `grant`'s two, written out: no Lua call more than needed on every cycle's path).
  if present == 0 and not fence then
    local token = micros_text(redis.call('time'))
    redis.call('hset', key, owner, '1', HOLDER_FIELD, record_of(token, owner, meta))
    redis.call('pexpire', key, lease_ms)
    return {1, tonumber(token)}
  end
  local t = redis.call('time')
  local me = member(lease_ms, owner, meta)
  local record
  -- Both keys there means held, so no second EXISTS; the caller's count and the record in
  -- one HMGET.
  if present == 2 or (present == 1 and redis.call('exists', key) == 1) then
    local mine = redis.call('hmget', key, owner, HOLDER_FIELD)
    if mine[1] then
      -- Already ours (a retry after a lost reply).
      redis.call('pexpire', key, lease_ms)
      return {1, token_of(mine[2])}
    end
    record = mine[2]
  else
    -- Free with waiters queued (a lease ran out, or a grant is being taken up): the first
    -- live waiter gets it, maybe the caller.
    local floor = floor_of(fence, 0)
    local head, token = grant_next(key, queue, t, floor, me, publish)
    if head == me then
      return {1, token}
    end
    if not head then
      token = token_at(t, floor)
      grant(key, owner, meta, lease_ms, text_of(token))
      return {1, token}
    end
    record = redis.call('hget', key, HOLDER_FIELD)
  end
  enqueue(queue, me, t, waiter_ttl_ms)
  -- The client reads the holder's token from its record: a grant with a token not above it
  -- was already superseded.
  return {0, redis.call('pttl', key), 0, record}
end

-- RELEASE: releases an owner's hold, or (with `meta`, the metadata its acquisition sent,
-- given only when the owner may still be queued) takes its entry out of the queue.
-- Answers NOT_HELD when the owner holds nothing (it only leaves the queue), else as
-- `end_hold`.
local function release(keys, args)
  local key, queue, fence = keys[1], keys[2], keys[3]
  local owner, lease_ms, publish, meta = args[1], args[2], args[3], args[4]
  -- The owner's count and the record (the hand-off's token floor) in one call.
  local held = redis.call('hmget', key, owner, HOLDER_FIELD)
  local count = tonumber(held[1] or '0')
  if count <= 0 then
    if meta then
      dequeue(queue, member(lease_ms, owner, meta))
    end
    return NOT_HELD
  end
  return end_hold(key, queue, fence, held[2], publish, owner, count, lease_ms)
end

-- TOUCH: sets the lease of the owner's hold again — a write even when the TTL stays the
-- same — so that `WAIT` on this connection counts the hold. Returns the lock's TTL in ms,
-- or 0 when the owner does not hold the lock.
local function touch(keys, args)
  local key = keys[1]
  local owner, lease_ms = args[1], args[2]
  if redis.call('hexists', key, owner) == 0 then return 0 end
  redis.call('pexpire', key, lease_ms)
  return redis.call('pttl', key)
end

-- FORCE_RELEASE: deletes the lock whoever holds it (its record goes with it), then hands it
-- on (see `end_hold`). Answers NOT_HELD when there was no lock, else as `end_hold`.
local function force_release(keys, args)
  local key, queue, fence = keys[1], keys[2], keys[3]
  local publish = args[1]
  if redis.call('exists', key) == 0 then
    return NOT_HELD
  end
  return end_hold(key, queue, fence, redis.call('hget', key, HOLDER_FIELD), publish)
end

-- FENCE_FLOOR (Redlock): raises the node's fence floor to at least a token, for a lease, so
-- that any later majority, which shares a node with this one, issues a greater token; the
-- floor then expires with the lease (no key outlives the lock). Returns 1.
local function fence_floor(keys, args)
  local fence = keys[3]
  local token, lease_ms = args[1], args[2]
  if tonumber(redis.call('get', fence) or '0') < tonumber(token) then
    redis.call('set', fence, token, 'px', lease_ms)
  end
  return 1
end
