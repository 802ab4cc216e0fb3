-- RW_ACQUIRE: takes a side of a read-write lock for an owner, or queues the owner.
-- A reader is granted while nobody writes and no live waiter is queued before it; a writer
-- while nobody holds the lock. Returns {1, token} when this owner holds its side (fresh,
-- handed to it, or already its own), else {0, pttl, the holds' highest token, a holder's
-- record or nil} after queueing the caller. A hash that is not a read-write lock (no
-- `mode`: a lock of `client.lock`) is busy and left alone.
local function rw_acquire(keys, args)
  local key, queue = keys[1], keys[2]
  local lease_ms, owner, meta, waiter_ttl_ms, publish, side =
    args[1], args[2], args[3], args[4], args[5], args[6]
  local present = redis.call('exists', key, queue)
  -- The uncontended path first: a free lock with nobody queued costs five calls.
  if present == 0 then
    local token = micros_text(redis.call('time'))
    grant_side(key, owner, side == 'write', meta, lease_ms, token, true)
    return {1, tonumber(token)}
  end
  -- The lock's mode and the caller's hold count in one call.
  local state = redis.call('hmget', key, 'mode', owner)
  local mode, mine = state[1], state[2]
  if not mode and (present == 2 or redis.call('exists', key) == 1) then
    return {0, redis.call('pttl', key), 0}
  end
  local t = redis.call('time')
  local me = member(lease_ms, owner, meta)
  if mode == 'write' and not mine then
    -- Another writer holds it, and while it does (its hold lives as long as the hash)
    -- nothing can be granted: the busy answer is the highest token of distlock's records
    -- and its record (the writer's: a writer's own read holds are Redisson's, which keep
    -- no record).
    local fields = redis.call('hgetall', key)
    local top, record = 0, nil
    local prefix = HOLDER_FIELD .. ':'
    for i = 1, #fields, 2 do
      if string.sub(fields[i], 1, #prefix) == prefix then
        local token = token_of(fields[i + 1])
        if not record or token > top then top, record = token, fields[i + 1] end
      end
    end
    enqueue(queue, me, t, waiter_ttl_ms)
    return {0, redis.call('pttl', key), top, record}
  end
  if mine then
    -- Already ours (a retry after a lost reply).
    if side == 'read' then
      redis.call('set', timeout_key(key, owner, 1), '1', 'px', lease_ms)
    end
    if redis.call('pttl', key) < tonumber(lease_ms) then
      redis.call('pexpire', key, lease_ms)
    end
    return {1, token_of(redis.call('hget', key, record_field(owner)))}
  end
  -- A reader joining readers with nobody queued (a mode and one key: the lock, no queue):
  -- no need to read every hold.
  if side == 'read' and mode == 'read' and present == 1 then
    local token = token_at(t, 0)
    grant_side(key, owner, false, meta, lease_ms, text_of(token), false)
    return {1, token}
  end
  local readers, writers, top, record = rw_holds(key)
  -- Readers hold it, or nobody (a writer's hold returned above): dead readers go, then the
  -- queue's head and the caller may fit.
  local held = prune_readers(key, readers, writers)
  if not held then
    -- Every holder died: the lock is free (their records go with the hash).
    redis.call('del', key)
  end
  local free = not held
  local reading = held and next(writers) == nil
  local token, granted
  token, granted, free, reading =
    rw_grant_waiting(key, queue, t, top, me, publish, free, reading)
  if not token and redis.call('exists', queue) == 0
      and (free or (reading and side == 'read')) then
    token = token_at(t, top)
    grant_side(key, owner, side == 'write', meta, lease_ms, text_of(token), free)
  end
  if token then
    return {1, token}
  end
  if granted > 0 then
    local _
    _, _, top, record = rw_holds(key)
  end
  enqueue(queue, me, t, waiter_ttl_ms)
  return {0, redis.call('pttl', key), top, record}
end

-- RW_RELEASE: releases an owner's side of a read-write lock, or (with `meta`) takes its
-- entry out of the queue. Answers NOT_HELD when the owner holds nothing (it only leaves the
-- queue), STILL_HELD when a reentrant hold remains (Redisson clients), RELEASED when its
-- hold ended (the lock deleted and Redisson's message published — RELEASE_MESSAGE after a
-- reader, WRITE_RELEASE_MESSAGE after a writer — or other holds remain), HANDED_OVER when
-- the lock was handed to waiters.
local function rw_release(keys, args)
  local key, queue = keys[1], keys[2]
  local owner, lease_ms, publish, meta = args[1], args[2], args[3], args[4]
  -- The owner's count and record in one call; for a last hold, how many fields the hash has
  -- (3 — mode, count, record — when it is the only hold).
  local state = redis.call('hmget', key, owner, record_field(owner))
  local count = state[1]
  local size = count == '1' and redis.call('hlen', key) or 0
  local writer = is_writer(owner)
  if size == 3 then
    -- The only hold ends. The uncontended path is the first pop finding nobody queued; the
    -- common hand-off is to a recent writer at the head; else `hand_over`, which may grant
    -- several readers.
    redis.call('del', key)
    if not writer then
      redis.call('del', timeout_key(key, owner, 1))
    end
    local popped = redis.call('zpopmin', queue)
    local head = popped[1]
    if not head then
      return rw_released(key, writer, publish)
    end
    local t = redis.call('time')
    local its_lease, its_owner, its_meta = parse_member(head)
    if its_owner and is_writer(its_owner) and recent(ms_of(t), popped[2]) then
      redis.call('zrem', queue, '~' .. head)
      local token = handoff_token(t, state[2])
      if publish_grant(publish, key, its_owner, token) then
        grant_side(key, its_owner, true, its_meta, claim_of(its_lease), token, true)
        return HANDED_OVER
      end
      -- Its client is gone: the next live waiters' turn.
      popped = nil
    end
    return hand_over(key, queue, t, token_of(state[2]), writer, publish, popped)
  end
  local floor = token_of(state[2])
  local holds_now = tonumber(count or '0')
  if holds_now <= 0 then
    if meta then
      dequeue(queue, member(lease_ms, owner, meta))
    end
    return NOT_HELD
  end
  if holds_now > 1 then
    redis.call('hincrby', key, owner, '-1')
    if not writer then
      redis.call('del', timeout_key(key, owner, holds_now))
    end
    return STILL_HELD
  end
  -- One hold of several ends.
  if not writer then
    redis.call('del', timeout_key(key, owner, 1))
  end
  redis.call('hdel', key, owner, record_field(owner))
  if not writer and redis.call('exists', queue) == 0 then
    -- Other holds remain and nobody waits: nothing to hand on, no need to read every hold
    -- (dead readers go with the hash's TTL, or at the next contended call).
    return RELEASED
  end
  local t = redis.call('time')
  local readers, writers, top = rw_holds(key)
  floor = math.max(top, floor)
  if prune_readers(key, readers, writers) then
    local reading = next(writers) == nil
    if reading then
      -- A writer's own read holds (Redisson's) remain: the lock is now read-locked.
      redis.call('hset', key, 'mode', 'read')
    end
    rw_grant_waiting(key, queue, t, floor, '', publish, false, reading)
    return RELEASED
  end
  -- Every other holder died: nobody holds it now.
  redis.call('del', key)
  return hand_over(key, queue, t, floor, writer, publish)
end

-- RW_TOUCH: writes the owner's side again (see TOUCH). Returns the lock's TTL in ms (never
-- shortened: other readers share the hash), or 0 when the owner holds no side of it.
local function rw_touch(keys, args)
  local key = keys[1]
  local owner, lease_ms = args[1], args[2]
  if redis.call('hexists', key, owner) == 0 then return 0 end
  local ttl = math.max(redis.call('pttl', key), tonumber(lease_ms))
  redis.call('pexpire', key, ttl)
  return ttl
end

-- RW_FORCE_RELEASE: see force_release_shared.
local function rw_force_release(keys, args)
  return force_release_shared(RW_CHANNEL, keys[1], nil, args[1])
end
