-- Semaphores (after the prelude above): `key` is a ZSET of holder owner -> expiry (ms,
-- Redis clock) and `holders` a hash of owner -> holder record (token, owner and metadata
-- joined by byte 31); both expire with the latest permit. A waiter's queue member is
-- `<lease ms>:<capacity>|<owner>|<meta>`: a hand-off checks the waiter's own capacity.

local function sem_member(lease_ms, capacity, owner, meta)
  return lease_ms .. ':' .. capacity .. '|' .. owner .. '|' .. meta
end
-- Drops the permits whose expiry has passed: their holders died or lost them.
local function prune(now)
  local dead = redis.call('zrangebyscore', key, '-inf', now)
  for _, owner in ipairs(dead) do
    redis.call('zrem', key, owner)
    redis.call('hdel', holders, owner)
  end
end
-- Keeps both keys until the latest permit's expiry.
local function expire_at_latest(now)
  local last = redis.call('zrange', key, -1, -1, 'WITHSCORES')
  if last[2] then
    local ttl = tonumber(last[2]) - now
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
  redis.call('zadd', key, ms_of(t) + tonumber(lease_ms), owner)
  redis.call('hset', holders, owner, record)
  return token
end
-- Grants permits to the waiters at the head of the queue, in arrival order (with rising
-- tokens), while the head's own capacity allows; drops dead waiters. Publishes each grant unless the grantee
-- is the member `skip`. Returns the token granted to `skip` (or nil), and how many were
-- granted.
local function grant_waiting(t, skip, publish)
  local now = ms_of(t)
  local token_of_skip, granted, last = nil, 0, 0
  for _ = 1, 64 do
    local head = redis.call('zrange', queue, 0, 0)[1]
    if not head then break end
    local alive = tonumber(redis.call('zscore', deadlines, head) or '0') > now
    local lease_ms, capacity, owner, meta = string.match(head, '^(%d+):(%d+)|([^|]*)|?(.*)$')
    if alive and capacity and redis.call('zcard', key) >= tonumber(capacity) then break end
    redis.call('zrem', queue, head)
    redis.call('zrem', deadlines, head)
    if alive and capacity then
      local token = give(owner, meta, lease_ms, t, last)
      granted, last = granted + 1, token
      if head == skip then
        token_of_skip = token
      else
        redis.call(publish, grant_channel(), GRANT_PREFIX .. owner .. ':' .. string.format('%d', token))
      end
    end
  end
  return token_of_skip, granted
end
-- The busy answer: the time until the first permit expires, its holder's token and record.
local function busy(now)
  local first = redis.call('zrange', key, 0, 0, 'WITHSCORES')
  if not first[1] then return {0, 0, 0} end
  local record = redis.call('hget', holders, first[1])
  local answer = {0, tonumber(first[2]) - now, token_of(record)}
  for _, v in ipairs(holder_fields(record)) do answer[#answer + 1] = v end
  return answer
end
