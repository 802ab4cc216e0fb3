#!lua name=distlock_2
-- distlock's protocol: one Redis Functions library (Redis 7.0+, Valkey 7.2+), loaded once
-- per server (FUNCTION LOAD; it replicates and persists with the data) and called with
-- FCALL / FCALL_RO. Its helpers and constants are defined once, at load time, so every
-- operation calls what it needs.
--
-- The version is in the library's name (the line above) and in every function's name
-- (PREFIX below): function names are global on a server, so two client versions with
-- different libraries run side by side there. Any change to this file takes a new version
-- (lock-core's tests pin this file's text to its version).
--
-- Each function reads its keys and arguments by name in its first lines. The keys of one
-- lock come in one order: the lock, its queue, then a semaphore's records or, under
-- Redlock only, the fence floor. Every key of a call shares the lock's Cluster slot.
--
-- The lock is Redisson's hash `owner -> hold count` with a PEXPIRE, plus one field
-- HOLDER_FIELD holding the hold's record: its fencing token, owner and, when recorded,
-- service, host, pid and request id, joined by byte 31. The record goes with the hash, and
-- Redisson's scripts only read their own owner's field. A release publishes RELEASE_MESSAGE
-- on Redisson's channel; a hand-off publishes a grant on the waiter's client's own grants
-- channel (Redisson decodes every payload on its channels as a number).
--
-- The queue is one ZSET holding each waiter twice: its member `m` scored by arrival (the
-- Redis clock in µs, so ZPOPMIN takes the head) and `'~' .. m` scored LIVE_BASE − its
-- liveness deadline (ms), which sorts after every arrival. One `ZADD LT` of both queues a
-- waiter or refreshes it: a later arrival is not lower, so its place is kept; a later
-- deadline is, so it is extended. The two entries always go together. A member is
-- `<lease ms>|<owner>|<metadata>` (a semaphore's `<lease ms>:<capacity>|…`), so a hand-off
-- sets the waiter's own record.
--
-- A hand-off must not hand a name to the dead. It skips a waiter whose client does not
-- listen for its grants (a client that died, was dropped or ended its runtime has no
-- subscription left), and it grants a *claim*, not a lease: the hold lives
-- CLAIM_MS (or the waiter's lease if shorter) until the new holder's client, which read the
-- grant, extends it to its lease (RENEW). A waiter that dies while its grant travels blocks
-- the name for a claim, not a lease.
--
-- Fencing tokens are the Redis clock in microseconds at the grant, and never at or below
-- the previous holder's token when it is known (a hand-off, Redlock's fence floor): no
-- counter outlives the lock, and a name whose state is all gone starts again from the
-- clock, which has moved on.

-- Constants. lock-core's Rust side has the same values (its tests compare them).
local PREFIX = 'distlock_2_'
local HOLDER_FIELD = 'distlock:holder'
local VALUE_FIELD = 'distlock:holder:value'
local HOLDERS_PREFIX = 'distlock__holders:'
local GRANTS_PREFIX = 'distlock__claim:'
local GRANT_PREFIX = 'distlock:grant:'
local LOCK_CHANNEL = 'redisson_lock__channel:'
local RW_CHANNEL = 'redisson_rwlock:'
local SEMAPHORE_CHANNEL = 'distlock__semaphore:'
local RELEASE_MESSAGE = '0'
local WRITE_RELEASE_MESSAGE = '1'
local LEADER_MESSAGE = '2'
local LIVE_BASE = 9000000000000000
local WAITER_TTL_MIN = 6000
local CLAIM_MS = 1500

-- True while a call runs as a Cluster variant (see `register`): there plain PUBLISH answers
-- only the node's own subscribers, so its count says nothing of a waiter's client. A server
-- runs the variants of one kind only, so this never changes back.
local on_cluster = false

------------------------------------------------------------------------------------------
-- Shared helpers

-- Milliseconds of a TIME reply.
local function ms_of(t)
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- Microseconds of a TIME reply as text: no number formatted (`..` would print a number
-- above 10^14 as '1.79e+15').
local function micros_text(t)
  return t[1] .. string.sub('00000' .. t[2], -6)
end
-- A release channel: `prefix` is the kind's.
local function channel(prefix, key)
  return prefix .. '{' .. key .. '}'
end
-- A holder record: token (text), owner, and the metadata when there is any.
local function record_of(token, owner, meta)
  local record = token .. '\31' .. owner
  if meta ~= '' then record = record .. '\31' .. meta end
  return record
end
-- The token of a holder record, 0 without one.
local function token_of(record)
  return tonumber(record and string.match(record, '^%d+') or '0')
end
-- Tells waiter `owner` that it holds the lock `key` now, with `token` (a number or its
-- text). Only on its client's grants channel (the client id is the owner's text before its
-- first ':'), so no other process waiting here hears it. False, with nothing published,
-- when nobody listens there: the waiter's client is gone, and the caller skips it.
-- Counted before publishing, not by PUBLISH's answer: a message this server publishes also
-- reaches the listeners of its replicas, so a waiter still listening on a demoted master
-- would hear a grant that was never written.
local function publish_grant(publish, key, owner, token)
  if type(token) == 'number' then token = string.format('%d', token) end
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
-- A fresh grant's fencing token: the Redis clock `t` in µs, above `floor`.
local function token_at(t, floor)
  return math.max(tonumber(t[1]) * 1000000 + tonumber(t[2]), floor + 1)
end
-- The lowest token a grant must exceed: `previous` (the last holder's), and under Redlock
-- the fence floor.
local function floor_of(fence, previous)
  if fence then
    return math.max(previous, tonumber(redis.call('get', fence) or '0'))
  end
  return previous
end
-- A hand-off's fencing token as text: the Redis clock `t` in µs, above the last holder's
-- token (the first field of its record `previous`, or nil). Both have 16 digits (from 2001
-- to 2286), and then their text orders as their value does: no number parsed or formatted.
-- Any other length goes by the numbers.
local function handoff_token(t, previous)
  local token = micros_text(t)
  if previous and not (#token == 16 and string.byte(previous, 17) == 31
      and string.sub(previous, 1, 16) < token) then
    token = string.format('%d', math.max(tonumber(token), token_of(previous) + 1))
  end
  return token
end
-- A waiter's queue member (see the top of this file).
local function member(lease_ms, owner, meta)
  return lease_ms .. '|' .. owner .. '|' .. meta
end
-- Queues waiter `me` at Redis time `t`, or refreshes it, alive for `ttl` ms (`waiter_ttl_ms`
-- as sent), WAITER_TTL_MIN at least (see `alive`); the queue lives as long as its last
-- waiter.
local function enqueue(queue, me, t, ttl, waiter_ttl_ms)
  local ms, expiry = ttl, waiter_ttl_ms
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
-- True when the waiter `head`, just taken off the queue, was alive at `now` (ms); its
-- deadline goes too. A waiter that arrived (`arrival`, its score in µs, when the caller
-- read it) less than WAITER_TTL_MIN ago is alive without reading its deadline: every
-- queueing lasts at least that long, and a refresh only moves the deadline later.
local function alive(queue, head, now, arrival)
  if arrival and now < math.floor(tonumber(arrival) / 1000) + WAITER_TTL_MIN then
    redis.call('zrem', queue, '~' .. head)
    return true
  end
  local live = redis.call('zscore', queue, '~' .. head)
  redis.call('zrem', queue, '~' .. head)
  return live and LIVE_BASE - tonumber(live) > now
end
-- The holder's owner, service, host, pid, acquired-at (ms) and request id, read from its
-- record, when the record has metadata; else {}. Acquired-at is the token's clock.
local function holder_fields(record)
  if not record then return {} end
  local f = {}
  for v in string.gmatch(record .. '\31', '([^\31]*)\31') do f[#f + 1] = v end
  if not f[3] then return {} end
  local at = string.format('%d', math.floor(tonumber(f[1]) / 1000))
  return {f[2], f[3], f[4] or '', f[5] or '', at, f[6] or ''}
end

------------------------------------------------------------------------------------------
-- The exclusive lock: Redisson's RLock.

-- Takes the (free) lock `key` for `owner` with `token` (a number) for `ttl_ms`; returns
-- the token.
local function grant(key, owner, meta, ttl_ms, token)
  redis.call('hset', key, owner, '1', HOLDER_FIELD,
    record_of(string.format('%d', token), owner, meta))
  redis.call('pexpire', key, ttl_ms)
  return token
end
-- Grants the (free) lock to the first waiter whose deadline has not passed and whose client
-- hears the grant, dropping the others: `t` the Redis clock, `floor` the lowest token the
-- grant must exceed, `skip` the queue member that is the caller (granted its lease, with no
-- message; '' for none), `head` and `arrival` the queue's first member and its score when
-- the caller already popped it (else nil). Returns member, token or nil.
local function grant_next(key, queue, t, floor, skip, publish, head, arrival)
  local now = ms_of(t)
  for _ = 1, 64 do
    if not head then
      local popped = redis.call('zpopmin', queue)
      head, arrival = popped[1], popped[2]
      if not head then return nil end
    end
    if alive(queue, head, now, arrival) then
      local lease_ms, owner, meta = string.match(head, '^(%d+)|([^|]*)|?(.*)$')
      local token = token_at(t, floor)
      if head == skip then
        return head, grant(key, owner, meta, lease_ms, token)
      end
      if publish_grant(publish, key, owner, token) then
        return head, grant(key, owner, meta, claim_of(lease_ms), token)
      end
    end
    head = nil
  end
  return nil
end

-- ACQUIRE: takes the lock for an owner, or queues the owner as a waiter.
-- Returns {1, token} when this owner holds the lock (fresh, handed to it, or already its
-- own — acquiring is idempotent, so a retry after a lost reply is safe), else
-- {0, pttl, 0, the holder's record or nil} after queueing the caller.
local function acquire(keys, args)
  local key, queue, fence = keys[1], keys[2], keys[3]
  local lease_ms, owner, meta, waiter_ttl_ms, publish = args[1], args[2], args[3], args[4], args[5]
  local present = redis.call('exists', key, queue)
  -- The uncontended path first: a free lock with nobody queued costs four calls.
  if present == 0 and not fence then
    local t = redis.call('time')
    local token = micros_text(t)
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
      return {1, grant(key, owner, meta, lease_ms, token_at(t, floor))}
    end
    record = redis.call('hget', key, HOLDER_FIELD)
  end
  local ttl = tonumber(waiter_ttl_ms)
  if ttl > 0 then
    enqueue(queue, me, t, ttl, waiter_ttl_ms)
  end
  -- The client reads the holder's token from its record: a grant with a token not above it
  -- was already superseded.
  return {0, redis.call('pttl', key), 0, record}
end

-- RELEASE: releases an owner's hold, or (with `meta`, the metadata its acquisition sent,
-- given only when the owner may still be queued) takes its entry out of the queue.
-- Returns 0 when the owner holds nothing (it only leaves the queue), 1 when the lock was
-- deleted and RELEASE_MESSAGE published, 2 when a reentrant hold remains (Redisson
-- clients), 3 when the lock was handed to the next waiter.
local function release(keys, args)
  local key, queue, fence = keys[1], keys[2], keys[3]
  local owner, lease_ms, publish, meta = args[1], args[2], args[3], args[4]
  -- The owner's count and the record (the hand-off's token floor) in one call.
  local held = redis.call('hmget', key, owner, HOLDER_FIELD)
  local holds = tonumber(held[1] or '0')
  if holds == 1 then
    -- The last hold ends: the uncontended path is the first pop finding nobody queued;
    -- else the popped waiter is the hand-off's first candidate.
    redis.call('del', key)
    local popped = redis.call('zpopmin', queue)
    local head = popped[1]
    if not head then
      redis.call(publish, channel(LOCK_CHANNEL, key), RELEASE_MESSAGE)
      return 1
    end
    local t = redis.call('time')
    -- The common hand-off: a head that queued less than WAITER_TTL_MIN ago is alive (see
    -- `alive`), and without a fence floor its token is compared as text.
    local its_lease, its_owner, its_meta = string.match(head, '^(%d+)|([^|]*)|?(.*)$')
    if its_owner and not fence
        and ms_of(t) < math.floor(tonumber(popped[2]) / 1000) + WAITER_TTL_MIN then
      redis.call('zrem', queue, '~' .. head)
      local token = handoff_token(t, held[2])
      if publish_grant(publish, key, its_owner, token) then
        redis.call('hset', key, its_owner, '1', HOLDER_FIELD,
          record_of(token, its_owner, its_meta))
        redis.call('pexpire', key, claim_of(its_lease))
        return 3
      end
      -- Its client is gone: the next live waiter's turn.
      head = nil
    end
    local floor = floor_of(fence, token_of(held[2]))
    if grant_next(key, queue, t, floor, '', publish, head, popped[2]) then
      return 3
    end
    redis.call(publish, channel(LOCK_CHANNEL, key), RELEASE_MESSAGE)
    return 1
  end
  if holds <= 0 then
    if meta then
      dequeue(queue, member(lease_ms, owner, meta))
    end
    return 0
  end
  redis.call('hincrby', key, owner, '-1')
  redis.call('pexpire', key, lease_ms)
  return 2
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
-- to the next waiter or publishes RELEASE_MESSAGE. Returns 0 when there was no lock, 1
-- when it was deleted, 2 when it was deleted and handed to a waiter.
local function force_release(keys, args)
  local key, queue, fence = keys[1], keys[2], keys[3]
  local publish = args[1]
  if redis.call('exists', key) == 0 then
    return 0
  end
  local floor = floor_of(fence, token_of(redis.call('hget', key, HOLDER_FIELD)))
  redis.call('del', key)
  if grant_next(key, queue, redis.call('time'), floor, '', publish) then
    return 2
  end
  redis.call(publish, channel(LOCK_CHANNEL, key), RELEASE_MESSAGE)
  return 1
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

-- MULTI_ACQUIRE: takes several free locks of one slot at once for one owner, or none: a
-- multi-lock's uncontended path. Not under Redlock. Keys: each lock's key and queue.
-- Returns {1, token} when every lock was free with nobody queued (all taken, one token),
-- else {0, i}: lock i is held or has waiters, and nothing was taken.
local function multi_acquire(keys, args)
  local lease_ms, owner, meta = args[1], args[2], args[3]
  for i = 1, #keys, 2 do
    if redis.call('exists', keys[i], keys[i + 1]) ~= 0 then
      return {0, (i + 1) / 2}
    end
  end
  local token = micros_text(redis.call('time'))
  local record = record_of(token, owner, meta)
  for i = 1, #keys, 2 do
    redis.call('hset', keys[i], owner, '1', HOLDER_FIELD, record)
    redis.call('pexpire', keys[i], lease_ms)
  end
  return {1, tonumber(token)}
end

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
-- Gives `owner` its side (write for a ':write' owner, else read) with `token` (a number)
-- for `ttl_ms`; returns the token. The hash lives as long as its longest hold: `fresh` says
-- it was just created (no TTL yet), so its TTL need not be read.
local function grant_side(key, owner, meta, ttl_ms, token, fresh)
  local side = is_writer(owner) and 'write' or 'read'
  redis.call('hset', key, 'mode', side, owner, '1', record_field(owner),
    record_of(string.format('%d', token), owner, meta))
  if side == 'read' then
    redis.call('set', timeout_key(key, owner, 1), '1', 'px', ttl_ms)
  end
  if fresh or redis.call('pttl', key) < tonumber(ttl_ms) then
    redis.call('pexpire', key, ttl_ms)
  end
  return token
end
-- Grants the lock to the waiters at the head of the queue, in arrival order, while they
-- fit: a writer when nobody holds it, readers while nobody writes (a writer at the head
-- stops the readers behind it: writers are not starved). Drops dead waiters it looks at
-- (and those whose client does not hear the grant); looks at none while a writer holds it.
-- The caller `skip` is granted its lease, the others a claim. `free`: no holds (the hash is gone); `reading`:
-- only readers hold. Publishes each grant unless the grantee is the member `skip`.
-- `popped`: the queue's head {member, arrival} when the caller already took it off (a free
-- lock's only), else nil. Returns the token granted to `skip` (or nil), how many were
-- granted, and the new `free` and `reading`.
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
    local lease_ms, owner, meta = string.match(head, '^(%d+)|([^|]*)|?(.*)$')
    local writer = owner and is_writer(owner)
    if not free then
      -- Readers hold it: a live writer at the head waits, and stops the readers behind it.
      local live = writer and redis.call('zscore', queue, '~' .. head)
      if live and LIVE_BASE - tonumber(live) > now then break end
      redis.call('zrem', queue, head)
    end
    if alive(queue, head, now, first[2]) and owner then
      local token = token_at(t, floor)
      if head == skip then
        token_of_skip = grant_side(key, owner, meta, lease_ms, token, free)
      elseif publish_grant(publish, key, owner, token) then
        grant_side(key, owner, meta, claim_of(lease_ms), token, free)
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
-- Hands the lock, which nobody holds any more (the hash is gone), to the waiters at the
-- head of the queue (with tokens above `floor`; `popped` as for rw_grant_waiting), or
-- publishes its release (Redisson's message for a writer after a writer). Answers as
-- RW_RELEASE: 3 handed over, 1 released.
local function hand_over(key, queue, t, floor, writer, publish, popped)
  local _, granted = rw_grant_waiting(key, queue, t, floor, '', publish, true, false, popped)
  if granted > 0 then
    return 3
  end
  redis.call(publish, channel(RW_CHANNEL, key), writer and WRITE_RELEASE_MESSAGE or RELEASE_MESSAGE)
  return 1
end

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
    redis.call('hset', key, 'mode', side, owner, '1', record_field(owner),
      record_of(token, owner, meta))
    if side == 'read' then
      redis.call('set', timeout_key(key, owner, 1), '1', 'px', lease_ms)
    end
    redis.call('pexpire', key, lease_ms)
    return {1, tonumber(token)}
  end
  -- The lock's mode and the caller's hold count in one call.
  local state = redis.call('hmget', key, 'mode', owner)
  local mode, mine = state[1], state[2]
  if not mode and (present == 2 or redis.call('exists', key) == 1) then
    return {0, redis.call('pttl', key), 0}
  end
  local t = redis.call('time')
  local ttl = tonumber(waiter_ttl_ms)
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
    if ttl > 0 then
      enqueue(queue, me, t, ttl, waiter_ttl_ms)
    end
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
    return {1, grant_side(key, owner, meta, lease_ms, token_at(t, 0), false)}
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
    token = grant_side(key, owner, meta, lease_ms, token_at(t, top), free)
  end
  if token then
    return {1, token}
  end
  if granted > 0 then
    local _
    _, _, top, record = rw_holds(key)
  end
  if ttl > 0 then
    enqueue(queue, me, t, ttl, waiter_ttl_ms)
  end
  return {0, redis.call('pttl', key), top, record}
end

-- RW_RELEASE: releases an owner's side of a read-write lock, or (with `meta`) takes its
-- entry out of the queue. Returns 0 when the owner holds nothing (it only leaves the
-- queue), 1 when its hold ended (the lock deleted and Redisson's message published —
-- RELEASE_MESSAGE after a reader, WRITE_RELEASE_MESSAGE after a writer — or other holds
-- remain), 2 when a reentrant hold remains (Redisson clients), 3 when the lock was handed
-- to waiters.
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
    -- The only hold ends. The uncontended path is the first pop finding nobody queued;
    -- else the popped waiter is the hand-off's first candidate.
    redis.call('del', key)
    if not writer then
      redis.call('del', timeout_key(key, owner, 1))
    end
    local popped = redis.call('zpopmin', queue)
    local head = popped[1]
    if not head then
      redis.call(publish, channel(RW_CHANNEL, key),
        writer and WRITE_RELEASE_MESSAGE or RELEASE_MESSAGE)
      return 1
    end
    local t = redis.call('time')
    -- The common hand-off: a writer at the head that queued less than WAITER_TTL_MIN ago
    -- (alive: see `alive`) gets the free lock, its token compared as text.
    local its_lease, its_owner, its_meta = string.match(head, '^(%d+)|([^|]*:write)|(.*)$')
    if its_owner and ms_of(t) < math.floor(tonumber(popped[2]) / 1000) + WAITER_TTL_MIN then
      redis.call('zrem', queue, '~' .. head)
      local token = handoff_token(t, state[2])
      if publish_grant(publish, key, its_owner, token) then
        redis.call('hset', key, 'mode', 'write', its_owner, '1', record_field(its_owner),
          record_of(token, its_owner, its_meta))
        redis.call('pexpire', key, claim_of(its_lease))
        return 3
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
    return 0
  end
  if holds_now > 1 then
    redis.call('hincrby', key, owner, '-1')
    if not writer then
      redis.call('del', timeout_key(key, owner, holds_now))
    end
    return 2
  end
  -- One hold of several ends.
  if not writer then
    redis.call('del', timeout_key(key, owner, 1))
  end
  redis.call('hdel', key, owner, record_field(owner))
  if not writer and redis.call('exists', queue) == 0 then
    -- Other holds remain and nobody waits: nothing to hand on, no need to read every hold
    -- (dead readers go with the hash's TTL, or at the next contended call).
    return 1
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
    return 1
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

-- Deletes a read-write lock or a semaphore whoever holds it (with a semaphore's records),
-- then publishes RELEASE_MESSAGE on `prefix`'s channel: its queued waiters retry at once and
-- are granted in their order. (Readers' timeout keys expire with their lease.) Returns 0
-- when there was nothing to delete, 1 when it was deleted.
local function force_release_shared(prefix, key, holders, publish)
  if redis.call('exists', key) == 0 then
    return 0
  end
  redis.call('del', key)
  if holders then
    redis.call('del', holders)
  end
  redis.call(publish, channel(prefix, key), RELEASE_MESSAGE)
  return 1
end

-- RW_FORCE_RELEASE: see force_release_shared.
local function rw_force_release(keys, args)
  return force_release_shared(RW_CHANNEL, keys[1], nil, args[1])
end

------------------------------------------------------------------------------------------
-- Semaphores: `key` is a ZSET of holder owner -> expiry (ms, Redis clock) and `holders` a
-- hash of owner -> holder record; both expire with the latest permit. A waiter's queue
-- member is `<lease ms>:<capacity>|<owner>|<meta>`: a hand-off checks the waiter's own
-- capacity. Releases are published on distlock's own channel.

local function sem_member(lease_ms, capacity, owner, meta)
  return lease_ms .. ':' .. capacity .. '|' .. owner .. '|' .. meta
end
-- Drops the permits whose expiry has passed (their holders died or lost them) when the
-- first to expire, `first` (a ZRANGE 0 0 WITHSCORES answer), has; true when any went.
local function prune(key, holders, now, first)
  if not first[2] or tonumber(first[2]) > now then return false end
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
-- Gives `owner` a permit until Redis time `t` + `ttl_ms`, with `token` (a number);
-- returns the token.
local function give(key, holders, owner, meta, ttl_ms, t, token)
  redis.call('zadd', key, string.format('%d', ms_of(t) + tonumber(ttl_ms)), owner)
  redis.call('hset', holders, owner, record_of(string.format('%d', token), owner, meta))
  return token
end
-- Grants permits to the waiters at the head of the queue, in arrival order (with rising
-- tokens), while fewer than the head's own capacity are held (`held` of them now, counted
-- here as permits are given); drops the dead waiters it takes (and those whose client does
-- not hear the grant). It stops at a head that does not fit, alive or not: a deadline is
-- read only for a waiter that would be granted (a dead head goes at a later hand-off).
-- Publishes each grant, with a claim, unless the grantee is the member `skip` (its lease). `first`: the queue's head {member, arrival, …} when the caller already read it
-- (still queued), else nil. Returns the token granted to `skip` (or nil), how many were
-- granted, whether a waiter is left, and the longest lease given (ms, 0 for none).
local function sem_grant_waiting(key, queue, holders, t, skip, publish, held, first)
  local now = ms_of(t)
  local token_of_skip, granted, last, longest = nil, 0, 0, 0
  for _ = 1, 64 do
    local head = first or redis.call('zrange', queue, '0', '0', 'WITHSCORES')
    first = nil
    local m = head[1]
    if not m then return token_of_skip, granted, false, longest end
    local lease_ms, capacity, owner, meta = string.match(m, '^(%d+):(%d+)|([^|]*)|?(.*)$')
    if capacity and held >= tonumber(capacity) then
      return token_of_skip, granted, true, longest
    end
    redis.call('zrem', queue, m)
    if alive(queue, m, now, head[2]) and capacity then
      local token, ttl = token_at(t, last), tonumber(lease_ms)
      if m == skip then
        token_of_skip = token
      elseif publish_grant(publish, key, owner, token) then
        ttl = claim_of(lease_ms)
      else
        token = nil
      end
      if token then
        give(key, holders, owner, meta, ttl, t, token)
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
    redis.call('zadd', key, string.format('%d', ms_of(t) + tonumber(lease_ms)), owner)
    redis.call('hset', holders, owner, record_of(token, owner, meta))
    expire_both(key, holders, lease_ms)
    return {1, tonumber(token)}
  end
  local t = redis.call('time')
  local now = ms_of(t)
  local ttl = tonumber(waiter_ttl_ms)
  local me = sem_member(lease_ms, capacity, owner, meta)
  -- The first permit to expire: whether any died, and the busy answer's.
  local first = redis.call('zrange', key, '0', '0', 'WITHSCORES')
  local held, mine
  if not (first[2] and tonumber(first[2]) <= now) then
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
        if ttl > 0 then
          enqueue(queue, me, t, ttl, waiter_ttl_ms)
        end
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
    token = give(key, holders, owner, meta, lease_ms, t, token_at(t, 0))
  end
  if changed or granted > 0 or token then
    expire_at_latest(key, holders, now)
  end
  if token then
    return {1, token}
  end
  if ttl > 0 then
    enqueue(queue, me, t, ttl, waiter_ttl_ms)
  end
  if changed or granted > 0 then
    first = redis.call('zrange', key, '0', '0', 'WITHSCORES')
  end
  return sem_busy(holders, now, first)
end

-- SEM_RELEASE: gives an owner's permit back, or (with `meta`) takes its entry out of the
-- queue; lease_ms, capacity and meta make its queue member. Returns 0 when the owner held
-- no permit (it only leaves the queue), 1 when the permit was given back and
-- RELEASE_MESSAGE published, 3 when it was handed to waiters.
local function sem_release(keys, args)
  local key, queue, holders = keys[1], keys[2], keys[3]
  local owner, lease_ms, publish, capacity, meta = args[1], args[2], args[3], args[4], args[5]
  if redis.call('zrem', key, owner) == 0 then
    if meta then
      dequeue(queue, sem_member(lease_ms, capacity, owner, meta))
    end
    return 0
  end
  -- The queue's first two (none: nobody waits, so nobody listens either — the uncontended
  -- path; else the head is the hand-off's first candidate, and the one behind it says
  -- whether a second grant could follow).
  local heads = redis.call('zrange', queue, '0', '1', 'WITHSCORES')
  redis.call('hdel', holders, owner)
  if not heads[1] then
    return 1
  end
  local t = redis.call('time')
  local held = redis.call('zcard', key)
  -- The first permit to expire, while permits remain: none has expired if it has not.
  local first = held > 0 and redis.call('zrange', key, '0', '0', 'WITHSCORES')
  local now = ms_of(t)
  -- The common hand-off: no permit expired, and the head fits, queued less than
  -- WAITER_TTL_MIN ago (alive: see `alive`), and is the only one that fits (the next, if
  -- any, needs more permits free than will be).
  local head = heads[1]
  local its_lease, its_capacity, its_owner, its_meta =
    string.match(head, '^(%d+):(%d+)|([^|]*)|(.*)$')
  local next_capacity = heads[3] and tonumber(string.match(heads[3], '^%d+:(%d+)|') or '0')
  if its_owner and held < tonumber(its_capacity) and not (first and tonumber(first[2]) <= now)
      and now < math.floor(tonumber(heads[2]) / 1000) + WAITER_TTL_MIN
      and not (next_capacity and next_capacity > held + 1) then
    redis.call('zrem', queue, head, '~' .. head)
    local token = micros_text(t)
    if publish_grant(publish, key, its_owner, token) then
      local claim = claim_of(its_lease)
      redis.call('zadd', key, string.format('%d', now + claim), its_owner)
      redis.call('hset', holders, its_owner, record_of(token, its_owner, its_meta))
      -- Both keys live until the latest permit's expiry: this one's, unless a permit held
      -- lasts longer. With none held, both went with the last one: the grant made them
      -- afresh.
      if held == 0 or redis.call('pttl', key) < claim then
        expire_both(key, holders, claim)
      end
      return 3
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
    return 1
  end
  if held == 0 then
    -- Both keys went with the last permit: the grants made them afresh.
    expire_both(key, holders, string.format('%d', longest))
  else
    expire_at_latest(key, holders, now)
  end
  return 3
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

------------------------------------------------------------------------------------------
-- Every kind

-- INSPECT (reads only): a consistent snapshot of one lock of any kind; keys: the lock and
-- the queue of the kind to count waiters in. Returns {type of the lock key, the owners and
-- hold counts (for a lock or read-write lock its hash's counts, for a semaphore each live
-- permit's owner with 1), pttl, the holder's fencing token (0: none), live waiters, holder
-- fields or {}, the hash's `mode` ('read' or 'write'; 'permit' for a semaphore; '' else),
-- and for the last two every holder as owner, token, TTL ms, n and n holder fields,
-- flattened}.
local function inspect(keys)
  local key, queue = keys[1], keys[2]
  local kind = redis.call('type', key).ok
  local now = ms_of(redis.call('time'))
  local owners, record, mode, holdings = {}, nil, '', {}
  local function holding(owner, rec, ttl)
    local fields = holder_fields(rec)
    holdings[#holdings + 1] = owner
    holdings[#holdings + 1] = token_of(rec)
    holdings[#holdings + 1] = ttl
    holdings[#holdings + 1] = #fields
    for _, v in ipairs(fields) do holdings[#holdings + 1] = v end
  end
  local records_key = HOLDERS_PREFIX .. '{' .. key .. '}'
  if kind == 'hash' then
    local fields = redis.call('hgetall', key)
    local records, prefix = {}, HOLDER_FIELD .. ':'
    for i = 1, #fields, 2 do
      local f, v = fields[i], fields[i + 1]
      if f == HOLDER_FIELD then
        record = v
      elseif string.sub(f, 1, #prefix) == prefix then
        records[string.sub(f, #prefix + 1)] = v
      elseif f == 'mode' then
        mode = v
      else
        owners[#owners + 1] = f
        owners[#owners + 1] = v
      end
    end
    if mode ~= '' then
      local ttl = redis.call('pttl', key)
      for i = 1, #owners, 2 do
        local o = owners[i]
        local own_ttl = ttl
        if not is_writer(o) then
          own_ttl = redis.call('pttl', timeout_key(key, o, owners[i + 1]))
        end
        holding(o, records[o], own_ttl)
        if not record or is_writer(o) then record = records[o] end
      end
    end
  elseif kind == 'zset' and redis.call('exists', records_key) == 1 then
    -- A semaphore (any other ZSET has no records beside it).
    mode = 'permit'
    local permits = redis.call('zrangebyscore', key, '(' .. now, '+inf', 'WITHSCORES')
    for i = 1, #permits, 2 do
      local rec = redis.call('hget', records_key, permits[i])
      owners[#owners + 1] = permits[i]
      owners[#owners + 1] = 1
      holding(permits[i], rec or nil, tonumber(permits[i + 1]) - now)
      record = record or rec or nil
    end
  end
  -- Live waiters: deadline entries (above LIVE_BASE / 2, where arrivals never reach) whose
  -- deadline has not passed.
  local waiters = redis.call('zcount', queue, LIVE_BASE / 2,
    '(' .. string.format('%d', LIVE_BASE - now))
  return {kind, owners, redis.call('pttl', key), token_of(record), waiters,
    holder_fields(record), mode, holdings}
end

-- Renewers of RENEW, by mode code. Each takes the lease as a number (`lease_ms`) and, to
-- hand to redis.call, as sent (`lease`): a number given to redis.call is formatted anew.
-- A lock or a writer: the owner's field of the hash.
local function renew_field(key, owner, lease_ms, lease)
  if redis.call('hexists', key, owner) == 0 then return 0 end
  local ttl = redis.call('pttl', key)
  if ttl < lease_ms then
    redis.call('pexpire', key, lease)
    ttl = lease_ms
  end
  return ttl
end
-- A reader of a read-write lock: its field, and its timeout key (distlock holds once per
-- owner, n = 1). The hash lives as long as its longest hold.
local function renew_reader(key, owner, lease_ms, lease)
  if redis.call('hexists', key, owner) == 0 then return 0 end
  if redis.call('pexpire', timeout_key(key, owner, 1), lease) == 0 then return 0 end
  if redis.call('pttl', key) < lease_ms then
    redis.call('pexpire', key, lease)
  end
  return lease_ms
end
-- A permit of a semaphore: its expiry in the ZSET moves to now + lease (never back); the
-- ZSET and the records hash live until the latest permit.
local function renew_permit(key, owner, lease_ms)
  local expiry = tonumber(redis.call('zscore', key, owner) or '0')
  local now = ms_of(redis.call('time'))
  if expiry <= now then return 0 end
  if expiry < now + lease_ms then
    expiry = now + lease_ms
    redis.call('zadd', key, string.format('%d', expiry), owner)
  end
  if redis.call('pttl', key) < expiry - now then
    expire_both(key, HOLDERS_PREFIX .. '{' .. key .. '}', string.format('%d', expiry - now))
  end
  return expiry - now
end
local RENEWERS = {x = renew_field, w = renew_field, r = renew_reader, s = renew_permit}

-- RENEW: renews a batch of locks in one call (the watchdog's tick, or one extension).
-- Keys: the n locks, all in one slot. Arguments: owner, lease_ms and mode code of each
-- lock, in order ('x' a lock, 'w' a writer, 'r' a reader, 's' a semaphore's permit). For
-- each hold its owner still has, raises its TTL to at least the lease (never shortens it)
-- and answers the resulting TTL in ms; 0 for a hold the owner lost.
local function renew(keys, args)
  local out = {}
  for i = 1, #keys do
    local owner, lease, code = args[3 * i - 2], args[3 * i - 1], args[3 * i]
    out[i] = RENEWERS[code](keys[i], owner, tonumber(lease), lease)
  end
  return out
end

------------------------------------------------------------------------------------------
-- Run once across the fleet: scheduled jobs, elections, idempotency keys (exclusive locks).

-- LINGER: ends a hold but keeps the lock until a moment decided at its start (a scheduled
-- job's `hold_at_least`): instead of deleting the hash it sets the lease that is left.
-- Owner-checked. Returns 1 when the owner held the lock (it now expires in remaining_ms),
-- else 0.
local function linger(keys, args)
  local key = keys[1]
  local owner, remaining_ms = args[1], args[2]
  if redis.call('hexists', key, owner) == 0 then return 0 end
  redis.call('pexpire', key, remaining_ms)
  return 1
end

-- PROCLAIM: an election's leader announces its term, with the value it proclaims ('' for
-- none). The value is a field of the lock hash (VALUE_FIELD), so it lives and dies with the
-- term. Returns 1 when the owner leads (the value set and LEADER_MESSAGE published on the
-- lock's channel: observers read the leader again, waiters retry once), else 0.
local function proclaim(keys, args)
  local key = keys[1]
  local owner, value, publish = args[1], args[2], args[3]
  if redis.call('hexists', key, owner) == 0 then return 0 end
  if value == '' then
    redis.call('hdel', key, VALUE_FIELD)
  else
    redis.call('hset', key, VALUE_FIELD, value)
  end
  redis.call(publish, channel(LOCK_CHANNEL, key), LEADER_MESSAGE)
  return 1
end

-- LEADER (reads only): who leads an election now, in one snapshot. Returns {pttl, the
-- holder's token (0: none), the holder's owner ('': none), 1 when a value is proclaimed else
-- 0, the value or '', then the holder fields when its record has them}.
local function leader(keys)
  local key = keys[1]
  local record = redis.call('hget', key, HOLDER_FIELD)
  local value = redis.call('hget', key, VALUE_FIELD)
  local owner = record and string.match(record, '^%d+\31([^\31]*)') or ''
  local out = {redis.call('pttl', key), token_of(record), owner, value and 1 or 0, value or ''}
  for _, v in ipairs(holder_fields(record)) do out[#out + 1] = v end
  return out
end

-- COMPLETE: stores an idempotency record and releases its in-flight hold, in one step, and
-- only while the hold is still the one its caller was granted. Keys: the lock, its queue,
-- the record (a key of the lock's slot; records are not kept under Redlock). Returns 0
-- when `owner` no longer holds the lock with `token`: nothing stored or released. Else the
-- record is stored and the hold released as RELEASE does (1, 2 or 3).
local function complete(keys, args)
  local key, queue, record = keys[1], keys[2], keys[3]
  local owner, token, lease_ms, publish, value, retention_ms =
    args[1], args[2], args[3], args[4], args[5], args[6]
  local count = tonumber(redis.call('hget', key, owner) or '0')
  local current = token_of(redis.call('hget', key, HOLDER_FIELD))
  if count <= 0 or current ~= tonumber(token) then
    return 0
  end
  redis.call('set', record, value, 'px', retention_ms)
  -- The usual case: the last hold ends and nobody waits (an idempotent request never queues).
  if count == 1 and redis.call('exists', queue) == 0 then
    redis.call('del', key)
    redis.call(publish, channel(LOCK_CHANNEL, key), RELEASE_MESSAGE)
    return 1
  end
  if count > 1 then
    redis.call('hincrby', key, owner, '-1')
    redis.call('pexpire', key, lease_ms)
    return 2
  end
  redis.call('del', key)
  if grant_next(key, queue, redis.call('time'), current, '', publish) then
    return 3
  end
  redis.call(publish, channel(LOCK_CHANNEL, key), RELEASE_MESSAGE)
  return 1
end

------------------------------------------------------------------------------------------
-- Guarded writes: commands that commit only while a hold is current.

-- GUARDED_WRITE: runs a list of commands if and only if `owner` still holds the lock with
-- `token` — an exclusive lock ('x'), a read-write lock's writer ('w') or a semaphore's
-- permit ('s', its records in `holders`) — all in this one atomic call. Keys: the lock,
-- then for a permit its records, then every key the commands write (all of the lock's
-- slot; the client checked the commands against its allow-list). Arguments: owner, token,
-- mode code, the number of commands, then each command as its word count and its words.
-- Returns {0} when the hold is not current (nothing ran), else {1, the commands' replies}:
-- like EXEC, every command runs, and one that fails answers its error in its place (the
-- client then fails the call with it).
local function guarded_write(keys, args)
  local key = keys[1]
  local owner, token, mode, count = args[1], args[2], args[3], tonumber(args[4])
  local holders = mode == 's' and keys[2]
  local record
  if mode == 's' then
    local expiry = redis.call('zscore', key, owner)
    if not expiry or tonumber(expiry) <= ms_of(redis.call('time')) then return {0} end
    record = redis.call('hget', holders, owner)
  elseif mode == 'w' then
    record = redis.call('hget', key, record_field(owner))
  else
    record = redis.call('hget', key, HOLDER_FIELD)
  end
  -- The record starts with the hold's token and owner: a later hold of the name has a
  -- greater token, another owner another name.
  local current = token .. '\31' .. owner
  if not record or string.sub(record, 1, #current) ~= current
      or not (#record == #current or string.byte(record, #current + 1) == 31) then
    return {0}
  end
  local replies, at = {}, 5
  for n = 1, count do
    local words = tonumber(args[at])
    replies[n] = redis.pcall(unpack(args, at + 1, at + words))
    at = at + words + 1
  end
  return {1, replies}
end

------------------------------------------------------------------------------------------
-- Registration

-- Not while the lock's slot is being migrated to another Cluster node (resharding): there
-- Redis serves a key only on the node that has it, so a function could stop half-way, its
-- first writes done, at a key it has just emptied (the source refuses it), or read a key
-- still on the other node as missing (the target serves it). EXISTS of two keys of the slot
-- that never exist fails on both nodes (ASK on the source, TRYAGAIN on the target) and
-- answers anywhere else: before any write, the call answers TRYAGAIN, which the client
-- retries until the slot has moved.
local function migrating(key)
  local tag = '{' .. key .. '}'
  local probe = redis.pcall('exists', 'distlock__absent:' .. tag, 'distlock__absent2:' .. tag)
  if type(probe) == 'table' then
    return redis.error_reply('TRYAGAIN the slot of ' .. key .. ' is being migrated')
  end
end

-- One function, named with this version's PREFIX. A function that may write is refused
-- under OOM unless flagged `allow-oom`: those that only end or extend holds have it, so a
-- full server can still let its locks go.
local function register_one(name, callback, flags)
  redis.register_function{function_name = PREFIX .. name, callback = callback, flags = flags}
end
-- An operation of one lock, registered twice: as it is (one server, Sentinel, Redlock), and
-- with `_cluster` behind the migration guard.
local function register(name, callback, flags)
  register_one(name, callback, flags)
  register_one(name .. '_cluster', function(keys, args)
    on_cluster = true
    local refused = migrating(keys[1])
    if refused then return refused end
    return callback(keys, args)
  end, flags)
end

local READS = {'no-writes'}
local FREES = {'allow-oom'}

register('acquire', acquire)
register('release', release, FREES)
register('touch', touch, FREES)
register('force_release', force_release, FREES)
register('rw_acquire', rw_acquire)
register('rw_release', rw_release, FREES)
register('rw_touch', rw_touch, FREES)
register('rw_force_release', rw_force_release, FREES)
register('sem_acquire', sem_acquire)
register('sem_release', sem_release, FREES)
register('sem_touch', sem_touch, FREES)
register('sem_force_release', sem_force_release, FREES)
register('inspect', inspect, READS)
register('linger', linger, FREES)
register('proclaim', proclaim)
register('leader', leader, READS)
register('complete', complete)
register('guarded_write', guarded_write)
-- Redlock only (never on a Cluster).
register_one('fence_floor', fence_floor)
-- Many locks of one slot. MULTI_ACQUIRE needs no guard: on a slot mid-migration Redis runs
-- it only where all its keys exist, and then it answers the first lock busy without
-- writing.
register_one('multi_acquire', multi_acquire)
-- RENEW on a Cluster takes the guard only when a renewal touches a key it does not declare
-- (a reader's timeout key, a permit's records), which a slot mid-migration may hold on the
-- other node; a lock's or a writer's renewal touches its own key only.
register_one('renew', renew, FREES)
register_one('renew_cluster', function(keys, args)
  on_cluster = true
  for i = 3, #args, 3 do
    if args[i] == 'r' or args[i] == 's' then
      local refused = migrating(keys[1])
      if refused then return refused end
      break
    end
  end
  return renew(keys, args)
end, FREES)
