-- distlock's protocol: one Redis Functions library (Redis 7.0+, Valkey 7.2+), loaded once
-- per server (FUNCTION LOAD; it replicates and persists with the data) and called with
-- FCALL / FCALL_RO. Its helpers and constants are defined once, at load time, so every
-- operation calls what it needs.
--
-- The library is these files joined, one per kind of hold or concern (lock-core's
-- protocol/library.rs joins them), behind a prelude that lock-core's Rust side writes: the
-- library's name, PREFIX, CLUSTER_SUFFIX and the kinds' letters. Its end, also written
-- there, registers each function from lock-core's table of functions.
--
-- The version is in the library's name (the first line) and in every function's name
-- (PREFIX): function names are global on a server, so two client versions with different
-- libraries run side by side there. Any change to these files takes a new version
-- (lock-core's tests pin the library's text to its version).
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

-- What the functions that end a hold answer, one meaning each across functions (documented
-- once, with lock-core's `ReleaseReply`, in protocol/replies.rs). Locals, not a table's
-- fields: a release reads one without a lookup.
local NOT_HELD = 0
local RELEASED = 1
local STILL_HELD = 2
local HANDED_OVER = 3

-- True while a call runs as a Cluster variant (see `guarded`): there plain PUBLISH answers
-- only the node's own subscribers, so its count says nothing of a waiter's client. A server
-- runs the variants of one kind only, so this never changes back.
local on_cluster = false

------------------------------------------------------------------------------------------
-- Shared helpers: the clock, holder records and fencing tokens.
--
-- Every Lua call costs Redis CPU on each FCALL (a few hundred instructions: more than a
-- command's argument parsing), so the paths every cycle takes (an uncontended acquire and
-- release, a hand-off to a recent head, a busy acquire) call few helpers, and tokens reach
-- them as text, formatted once where a number is made (`text_of`). Fewer layers there is
-- measured, not guessed: examples/bench/profile/instructions.py counts Redis' instructions
-- per cycle.

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
-- A token (a number) as text, formatted whole (`..` would print one above 10^14 as
-- '1.79e+15').
local function text_of(token)
  return string.format('%d', token)
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
-- True when `record` is the record of the hold `owner` was granted with `token` (its text,
-- as sent): a record starts with its hold's token and owner, a later hold of the name has a
-- greater token, another owner another name. Compared as text, so no token is parsed.
local function is_current(record, owner, token)
  local current = token .. '\31' .. owner
  return record and string.sub(record, 1, #current) == current
    and (#record == #current or string.byte(record, #current + 1) == 31)
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
-- Deletes a read-write lock or a semaphore whoever holds it (with a semaphore's records),
-- then publishes RELEASE_MESSAGE on `prefix`'s channel: its queued waiters retry at once and
-- are granted in their order. (Readers' timeout keys expire with their lease.) Returns
-- NOT_HELD when there was nothing to delete, else RELEASED.
local function force_release_shared(prefix, key, holders, publish)
  if redis.call('exists', key) == 0 then
    return NOT_HELD
  end
  redis.call('del', key)
  if holders then
    redis.call('del', holders)
  end
  redis.call(publish, channel(prefix, key), RELEASE_MESSAGE)
  return RELEASED
end
