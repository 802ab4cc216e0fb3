-- Shared by the scripts of one lock. Each `-- @prelude` line of a script, on the branches
-- that need helpers (a hand-off, a free lock with waiters, the rare paths), takes the
-- functions below that the code after it calls first (scripts.rs links them; a line
-- `-- @prelude: this block` defines them for its block only), so that the uncontended
-- paths, the busy answers and the common hand-offs define none: Lua creates every
-- function of a script afresh on each call that passes its definition. The generated header
-- (see scripts.rs) defines the lock's keys as locals in the one order all scripts take —
--   key, queue, fence = KEYS[1] .. KEYS[3]
-- where `fence` is only given under Redlock (nil otherwise) — and the constants
-- HOLDER_FIELD, LIVE_BASE, WAITER_TTL_MIN, CHANNEL_PREFIX, GRANTS_PREFIX, GRANT_PREFIX and
-- RELEASE_MESSAGE.
--
-- The queue is one ZSET holding each waiter twice: its member `m` scored by arrival (the
-- Redis clock in µs, so ZPOPMIN takes the head) and `'~' .. m` scored LIVE_BASE − its
-- liveness deadline (ms), which sorts after every arrival. One `ZADD LT` of both queues a
-- waiter or refreshes it: a later arrival is not lower, so its place is kept; a later
-- deadline is, so it is extended. The two entries always go together.
--
-- The lock is Redisson's hash `owner -> hold count`, plus one field HOLDER_FIELD holding
-- the hold's record: its fencing token, owner and, when recorded, service, host, pid and
-- request id, joined by byte 31. The record goes with the hash (no key of its own), and
-- Redisson's scripts only ever read their own owner's field.
--
-- Fencing tokens are the Redis clock in microseconds at the grant, and never at or below
-- the previous holder's token when it is known (a hand-off, Redlock's fence floor): no
-- counter outlives the lock, and a name whose state is all gone (released, expired, or lost
-- in a restart without persistence) starts again from the clock, which has moved on.

-- The release channel: Redisson's for a lock or a read-write lock, where only its own
-- messages go (`0`, `1`: Redisson decodes every payload there as a number).
local function channel()
  return CHANNEL_PREFIX .. '{' .. key .. '}'
end
-- Tells waiter `owner` that it holds the lock now, with `token`. Only on its client's
-- grants channel (distlock's own beside Redisson's, same slot; the client id is the
-- owner's text before its first ':'), so no other process waiting here hears it.
local function publish_grant(publish, owner, token)
  redis.call(publish, GRANTS_PREFIX .. '{' .. key .. '}:' .. string.match(owner, '^[^:]*'),
    GRANT_PREFIX .. owner .. ':' .. string.format('%d', token))
end
-- Milliseconds of a TIME reply.
local function ms_of(t)
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- The token of a holder record, 0 without one.
local function token_of(record)
  return tonumber(record and string.match(record, '^%d+') or '0')
end
-- The lowest token a grant must exceed: `previous` (the last holder's), and under Redlock
-- the fence floor.
local function floor_of(previous)
  if fence then
    return math.max(previous, tonumber(redis.call('get', fence) or '0'))
  end
  return previous
end
-- Queues waiter `me` at Redis time `t` (see queue_waiter below).
local function enqueue(me, t, ttl)
  local now = ms_of(t)
  -- @inline queue_waiter
end
-- True when the waiter `head`, just taken off the queue, was alive at `now` (ms); its
-- deadline goes too. A waiter that arrived (`arrival`, its score in µs, when the caller
-- read it) less than WAITER_TTL_MIN ago is alive without reading its deadline: every
-- queueing lasts at least that long, and a refresh only moves the deadline later.
local function alive(head, now, arrival)
  if arrival and now < math.floor(tonumber(arrival) / 1000) + WAITER_TTL_MIN then
    redis.call('zrem', queue, '~' .. head)
    return true
  end
  local live = redis.call('zscore', queue, '~' .. head)
  redis.call('zrem', queue, '~' .. head)
  return live and LIVE_BASE - tonumber(live) > now
end
-- Takes waiter `me` out of the queue.
local function dequeue(me)
  redis.call('zrem', queue, me, '~' .. me)
end
-- A waiter's queue member: `<lease ms>|<owner>|<metadata>`, so a hand-off can set the
-- waiter's own lease and holder record (owners never contain `|`; only the first two count).
local function member(lease_ms, owner, meta)
  return lease_ms .. '|' .. owner .. '|' .. meta
end
-- Takes the (free) lock for `owner` with `lease_ms` at Redis time `t`; returns the token.
-- '%d': `..` would print a number above 10^14 as '1.79e+15'.
local function grant(owner, meta, lease_ms, t, floor)
  local token = math.max(tonumber(t[1]) * 1000000 + tonumber(t[2]), floor + 1)
  local record = string.format('%d', token) .. '\31' .. owner
  if meta ~= '' then record = record .. '\31' .. meta end
  redis.call('hset', key, owner, '1', HOLDER_FIELD, record)
  redis.call('pexpire', key, lease_ms)
  return token
end
-- Grants the (free) lock to the first waiter whose deadline has not passed, dropping dead
-- ones: `t` the Redis clock (a TIME reply), `floor` the lowest token the grant must exceed
-- (floor_of), `skip` the queue member not to publish the grant to (the caller; '' for
-- none), `publish` the publish command, `head` and `arrival` the queue's first member and
-- its score when the caller already popped it (else nil). Tells the grantee
-- (publish_grant) unless it is `skip`. Returns member, token or nil.
local function grant_next(t, floor, skip, publish, head, arrival)
  local now = ms_of(t)
  for _ = 1, 64 do
    if not head then
      local popped = redis.call('zpopmin', queue)
      head, arrival = popped[1], popped[2]
      if not head then return nil end
    end
    if alive(head, now, arrival) then
      local lease_ms, owner, meta = string.match(head, '^(%d+)|([^|]*)|?(.*)$')
      local token = grant(owner, meta, lease_ms, t, floor)
      if head ~= skip then
        publish_grant(publish, owner, token)
      end
      return head, token
    end
    head = nil
  end
  return nil
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
-- Snippets: pasted by scripts.rs where a line `-- @inline <name>` stands (in a script or in
-- a helper above), indented as that line. Text, not functions, so that a hot path taking
-- one defines no closure. Each names the locals it reads and defines; none calls a helper.
-- @snippet queue_waiter: queues waiter `me` at Redis time `t` (`now` in ms), or refreshes
-- it (see above), alive for `ttl` ms — the number of `waiter_ttl_ms`, WAITER_TTL_MIN at
-- least (see `alive`); the queue lives as long as its last waiter.
do
  local ms, expiry = ttl, waiter_ttl_ms
  if ms < WAITER_TTL_MIN then
    ms, expiry = WAITER_TTL_MIN, string.format('%d', WAITER_TTL_MIN)
  end
  redis.call('zadd', queue, 'LT', t[1] .. string.sub('00000' .. t[2], -6), me,
    string.format('%d', LIVE_BASE - now - ms), '~' .. me)
  redis.call('pexpire', queue, expiry)
end
-- @end
-- @snippet handoff_token: defines `token`, a hand-off's fencing token as text: the Redis
-- clock `t` in µs, above the last holder's token (the first field of its record `previous`,
-- or nil). Both have 16 digits (from 2001 to 2286), and then their text orders as their
-- value does: no number parsed or formatted. Any other length goes by the numbers.
local token = t[1] .. string.sub('00000' .. t[2], -6)
if previous and not (#token == 16 and string.byte(previous, 17) == 31
    and string.sub(previous, 1, 16) < token) then
  token = string.format('%d', math.max(tonumber(token),
    tonumber(string.match(previous, '^%d+') or '0') + 1))
end
-- @end
