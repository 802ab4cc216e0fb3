-- Read-write locks (after the prelude above): Redisson's RReadWriteLock layout. The hash
-- `key` holds `mode` ('read' or 'write'), a field per reader `<owner>` = hold count and the
-- writer's `<owner>:write` = hold count, and distlock's own record of each of its holders
-- in `HOLDER_FIELD:<owner>` (token first, then byte 31: never a bare number, since
-- Redisson's scripts loop over every numeric field as a hold count). Each reader hold n
-- has a key `{<key>}:<owner>:rwlock_timeout:<n>` living for its lease, so a dead reader is
-- known by its timeout keys being gone. Queue members are the lock's; a writer's owner
-- ends in ':write', as Redisson's do. Channel: CHANNEL_PREFIX is `redisson_rwlock:`.

local function is_writer(owner)
  return string.sub(owner, -6) == ':write'
end
local function record_field(owner)
  return HOLDER_FIELD .. ':' .. owner
end
local function timeout_key(owner, n)
  return '{' .. key .. '}:' .. owner .. ':rwlock_timeout:' .. n
end
-- The holds in the hash: readers and writers as {owner = hold count} (Redisson's and
-- distlock's), the highest token of distlock's records, and one record (a writer's first).
local function holds()
  local fields = redis.call('hgetall', key)
  local readers, writers, top, record = {}, {}, 0, nil
  local prefix = HOLDER_FIELD .. ':'
  for i = 1, #fields, 2 do
    local f, v = fields[i], fields[i + 1]
    if string.sub(f, 1, #prefix) == prefix then
      top = math.max(top, token_of(v))
      if not record or is_writer(string.sub(f, #prefix + 1)) then record = v end
    elseif f ~= 'mode' and tonumber(v) then
      if is_writer(f) then writers[f] = tonumber(v) else readers[f] = tonumber(v) end
    end
  end
  return readers, writers, top, record
end
-- Drops the readers whose timeout keys are all gone (they died); true while any reader or
-- writer remains.
local function prune_readers(readers, writers)
  local left = next(writers) ~= nil
  for owner, count in pairs(readers) do
    local alive = false
    for n = math.min(count, 64), 1, -1 do
      if redis.call('exists', timeout_key(owner, n)) == 1 then
        alive = true
        break
      end
    end
    if alive then
      left = true
    else
      redis.call('hdel', key, owner, record_field(owner))
      readers[owner] = nil
    end
  end
  return left
end
-- Gives `owner` its side (write for a ':write' owner, else read) at Redis time `t`, with a
-- token above `floor`; returns the token. The hash lives as long as its longest hold:
-- `fresh` says it was just created (no TTL yet), so its TTL need not be read.
local function grant_side(owner, meta, lease_ms, t, floor, fresh)
  local token = math.max(tonumber(t[1]) * 1000000 + tonumber(t[2]), floor + 1)
  local record = string.format('%d', token) .. '\31' .. owner
  if meta ~= '' then record = record .. '\31' .. meta end
  local side = is_writer(owner) and 'write' or 'read'
  redis.call('hset', key, 'mode', side, owner, '1', record_field(owner), record)
  if side == 'read' then
    redis.call('set', timeout_key(owner, 1), '1', 'px', lease_ms)
  end
  if fresh or redis.call('pttl', key) < tonumber(lease_ms) then
    redis.call('pexpire', key, lease_ms)
  end
  return token
end
-- Grants the lock to the waiters at the head of the queue, in arrival order, while they
-- fit: a writer when nobody holds it, readers while nobody writes (a writer at the head
-- stops the readers behind it: writers are not starved). Drops dead waiters it looks at;
-- looks at none while a writer holds it. `free`: no holds (the hash is gone); `reading`:
-- only readers hold. Publishes each grant unless the grantee is the member `skip`.
-- `popped`: the queue's head {member, arrival} when the caller already took it off (a free
-- lock's only), else nil. Returns the token granted to `skip` (or nil), how many were
-- granted, and the new `free` and `reading`.
local function grant_waiting(t, floor, skip, publish, free, reading, popped)
  local now = ms_of(t)
  local token_of_skip, granted = nil, 0
  for _ = 1, 64 do
    if not (free or reading) then break end
    -- A free lock takes whoever is at the head (granted, or dropped when dead): popped.
    local first
    if free then
      first = popped or redis.call('zpopmin', queue)
      popped = nil
    else
      first = redis.call('zrange', queue, '0', '0', 'WITHSCORES')
    end
    local head = first[1]
    if not head then break end
    local lease_ms, owner, meta = string.match(head, '^(%d+)|([^|]*)|?(.*)$')
    local writer = owner and is_writer(owner)
    if not free then
      -- Readers hold it: a live writer at the head waits, and stops the readers behind it.
      local live = writer and redis.call('zscore', queue, '~' .. head)
      if live and LIVE_BASE - tonumber(live) > now then break end
      redis.call('zrem', queue, head)
    end
    if alive(head, now, first[2]) and owner then
      local token = grant_side(owner, meta, lease_ms, t, floor, free)
      granted = granted + 1
      if head == skip then
        token_of_skip = token
      else
        publish_grant(publish, owner, token)
      end
      free, reading = false, not writer
    end
  end
  return token_of_skip, granted, free, reading
end
-- Hands the lock, which nobody holds any more (the hash is gone), to the waiters at the
-- head of the queue (with tokens above `floor`; `popped` as for grant_waiting), or
-- publishes its release (Redisson's message for a writer after a writer). Answers as
-- RELEASE: 3 handed over, 1 released.
local function hand_over(t, floor, writer, popped)
  local _, granted = grant_waiting(t, floor, '', publish, true, false, popped)
  if granted > 0 then
    return 3
  end
  redis.call(publish, channel(), writer and WRITE_RELEASE_MESSAGE or RELEASE_MESSAGE)
  return 1
end
-- The busy answer: the lock's TTL, the highest token of its holds and a holder's record
-- (the client reads the fields from it).
local function busy(top, record)
  return {0, redis.call('pttl', key), top, record}
end
