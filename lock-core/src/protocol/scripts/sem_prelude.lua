-- Semaphores (after the prelude above): `key` is a ZSET of holder owner -> expiry (ms,
-- Redis clock) and `holders` a hash of owner -> holder record (token, owner and metadata
-- joined by byte 31); both expire with the latest permit. A waiter's queue member is
-- `<lease ms>:<capacity>|<owner>|<meta>`: a hand-off checks the waiter's own capacity.

local function sem_member(lease_ms, capacity, owner, meta)
  return lease_ms .. ':' .. capacity .. '|' .. owner .. '|' .. meta
end
-- Drops the permits whose expiry has passed (their holders died or lost them) when the
-- first to expire, `first` (a ZRANGE 0 0 WITHSCORES answer), has; true when any went.
local function prune(now, first)
  if not first[2] or tonumber(first[2]) > now then return false end
  local dead = redis.call('zrangebyscore', key, '-inf', string.format('%d', now))
  for _, owner in ipairs(dead) do
    redis.call('zrem', key, owner)
    redis.call('hdel', holders, owner)
  end
  return true
end
-- Keeps both keys until the latest permit's expiry.
local function expire_at_latest(now)
  local last = redis.call('zrange', key, '-1', '-1', 'WITHSCORES')
  if last[2] then
    local ttl = string.format('%d', tonumber(last[2]) - now)
    redis.call('pexpire', key, ttl)
    redis.call('pexpire', holders, ttl)
  end
end
-- Gives `owner` a permit until Redis time `t` + `lease_ms`, with a token above `floor`;
-- returns the token.
local function give(owner, meta, lease_ms, t, floor)
  local token = math.max(tonumber(t[1]) * 1000000 + tonumber(t[2]), floor + 1)
  local record = string.format('%d', token) .. '\31' .. owner
  if meta ~= '' then record = record .. '\31' .. meta end
  redis.call('zadd', key, string.format('%d', ms_of(t) + tonumber(lease_ms)), owner)
  redis.call('hset', holders, owner, record)
  return token
end
-- Grants permits to the waiters at the head of the queue, in arrival order (with rising
-- tokens), while fewer than the head's own capacity are held (`held` of them now, counted
-- here as permits are given: no ZCARD per waiter); drops the dead waiters it takes. It
-- stops at a head that does not fit, alive or not: a deadline is read only for a waiter
-- that would be granted (a dead head goes at a later hand-off). Publishes each grant
-- unless the grantee is the member `skip`. `first`: the queue's head {member, arrival, …}
-- when the caller already read it (still queued), else nil. Returns the token granted to
-- `skip` (or nil), how many were granted, whether a waiter is left, and the longest lease
-- given (ms, 0 for none).
local function grant_waiting(t, skip, publish, held, first)
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
    if alive(m, now, head[2]) and capacity then
      local token = give(owner, meta, lease_ms, t, last)
      granted, last, held = granted + 1, token, held + 1
      longest = math.max(longest, tonumber(lease_ms))
      if m == skip then
        token_of_skip = token
      else
        publish_grant(publish, owner, token)
      end
    end
  end
  return token_of_skip, granted, true, longest
end
-- The busy answer: the time until the first permit expires (`first`, a ZRANGE 0 0
-- WITHSCORES answer), 0, and its holder's record (the client reads token and fields).
local function busy(now, first)
  if not first[1] then return {0, 0, 0} end
  return {0, tonumber(first[2]) - now, 0, redis.call('hget', holders, first[1])}
end
