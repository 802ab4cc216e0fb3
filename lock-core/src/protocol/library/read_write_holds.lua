------------------------------------------------------------------------------------------
-- Read-write locks: Redisson's RReadWriteLock layout. The hash `key` holds `mode` ('read'
-- or 'write'), a field per reader `<owner>` = hold count and the writer's `<owner>:write`
-- = hold count, and distlock's own record of each of its holders in `HOLDER_FIELD:<owner>`
-- (token first, then byte 31: never a bare number, since Redisson's scripts loop over every
-- numeric field as a hold count). Each reader hold n has a key
-- `{<key>}:<owner>:rwlock_timeout:<n>` living for its lease, so a dead reader is known by
-- its timeout keys being gone. A writer's owner ends in ':write', as Redisson's do.

local function is_writer(owner)
  return string.sub(owner, -6) == ':write'
end
local function record_field(owner)
  return HOLDER_FIELD .. ':' .. owner
end
local function timeout_key(key, owner, n)
  return '{' .. key .. '}:' .. owner .. ':rwlock_timeout:' .. n
end
-- The holds in the hash: readers and writers as {owner = hold count} (Redisson's and
-- distlock's), the highest token of distlock's records, and one record (a writer's first).
local function rw_holds(key)
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
local function prune_readers(key, readers, writers)
  local left = next(writers) ~= nil
  for owner, count in pairs(readers) do
    local living = false
    for n = math.min(count, 64), 1, -1 do
      if redis.call('exists', timeout_key(key, owner, n)) == 1 then
        living = true
        break
      end
    end
    if living then
      left = true
    else
      redis.call('hdel', key, owner, record_field(owner))
      readers[owner] = nil
    end
  end
  return left
end
-- Gives `owner` its side (`writer`: write, for an owner ending in ':write'; else read) with
-- `token` (text) for `ttl_ms`. The hash lives as long as its longest hold: `fresh` says it
-- was just created (no TTL yet), so its TTL need not be read.
local function grant_side(key, owner, writer, meta, ttl_ms, token, fresh)
  redis.call('hset', key, 'mode', writer and 'write' or 'read', owner, '1',
    record_field(owner), record_of(token, owner, meta))
  if not writer then
    redis.call('set', timeout_key(key, owner, 1), '1', 'px', ttl_ms)
  end
  if fresh or redis.call('pttl', key) < tonumber(ttl_ms) then
    redis.call('pexpire', key, ttl_ms)
  end
end
-- Grants the lock to the waiters at the head of the queue, in arrival order, while they
-- fit: a writer when nobody holds it, readers while nobody writes (a writer at the head
-- stops the readers behind it: writers are not starved). Drops dead waiters it looks at
-- (and those whose client does not hear the grant); looks at none while a writer holds it.
-- The caller `skip` is granted its lease, the others a claim, each published. `free`: no
-- holds (the hash is gone); `reading`: only readers hold.
-- `popped`: the queue's head {member, arrival} when the caller already took it off (a free
-- lock's only), else nil. Returns the token granted to `skip` (or nil), how many were
-- granted (a number), and the new `free` and `reading`.
local function rw_grant_waiting(key, queue, t, floor, skip, publish, free, reading, popped)
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
    local lease_ms, owner, meta = parse_member(head)
    local writer = owner and is_writer(owner)
    if not free then
      -- Readers hold it: a live writer at the head waits, and stops the readers behind it.
      if writer and live_at(queue, head, now) then break end
      redis.call('zrem', queue, head)
    end
    if alive(queue, head, now, first[2]) and owner then
      local token = token_at(t, floor)
      local text = text_of(token)
      if head == skip then
        grant_side(key, owner, writer, meta, lease_ms, text, free)
        token_of_skip = token
      elseif publish_grant(publish, key, owner, text) then
        grant_side(key, owner, writer, meta, claim_of(lease_ms), text, free)
      else
        token = nil
      end
      if token then
        granted = granted + 1
        free, reading = false, not writer
      end
    end
  end
  return token_of_skip, granted, free, reading
end
-- Publishes the release of a read-write lock that nobody holds now: Redisson's message
-- after a reader's last hold, or after a `writer`'s. Answers RELEASED.
local function rw_released(key, writer, publish)
  redis.call(publish, channel(RW_CHANNEL, key),
    writer and WRITE_RELEASE_MESSAGE or RELEASE_MESSAGE)
  return RELEASED
end
-- Hands the lock, which nobody holds any more (the hash is gone), to the waiters at the
-- head of the queue (with tokens above `floor`; `popped` as for rw_grant_waiting), or
-- publishes its release (`writer`: the last hold was a writer's). Answers HANDED_OVER or
-- RELEASED.
local function hand_over(key, queue, t, floor, writer, publish, popped)
  local _, granted = rw_grant_waiting(key, queue, t, floor, '', publish, true, false, popped)
  if granted > 0 then
    return HANDED_OVER
  end
  return rw_released(key, writer, publish)
end
