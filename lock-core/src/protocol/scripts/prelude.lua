-- Shared by every script of one lock, after the generated header (see scripts.rs), which
-- defines the lock's keys as locals in the one order all of them take —
--   key, fence, queue, deadlines, holder, channel = KEYS[1] .. KEYS[6]
-- (a script that takes fewer keys takes the first ones) — and the message constants
-- GRANT_PREFIX and RELEASE_MESSAGE.
--
-- Here: the Redis clock, fencing tokens, holder records, and handing a free lock to the
-- first live waiter.

-- The Redis clock, read at most once per script run.
local clock = nil
local function redis_time()
  clock = clock or redis.call('time')
  return clock
end
local function now_ms()
  local t = redis_time()
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- The next fencing token. A new counter (the lock's first hold, or one lost with Redis'
-- data) starts at the Redis clock in microseconds, not at 1, so tokens stay increasing
-- across a restart without persistence: an old counter is at most its start plus one per
-- acquisition, far below the clock by the time it could be lost.
local function next_token()
  local token = redis.call('incr', fence)
  if token ~= 1 then return token end
  local t = redis_time()
  local start = t[1] .. string.format('%06d', tonumber(t[2]))
  redis.call('set', fence, start)
  return tonumber(start)
end
-- A waiter's queue member: `<lease ms>|<owner>|<metadata>`, so a hand-off can set the
-- waiter's own lease and holder record (owners never contain `|`; only the first two count).
local function member(lease_ms, owner, meta)
  return lease_ms .. '|' .. owner .. '|' .. meta
end
-- Records who holds the lock, with the lock's lease: owner, then `meta` (service, host,
-- pid and request id separated by byte 31), then the time. Without metadata any stale
-- record is deleted. `now` may be nil: the clock is read only when a record is written.
local function set_holder(owner, meta, now, lease)
  if meta == '' then
    redis.call('del', holder)
    return
  end
  redis.call('set', holder, owner .. '\31' .. meta .. '\31' .. (now or now_ms()), 'px', lease)
end
-- The holder record's fields (owner, service, host, pid, acquired-at ms, request id) when it
-- belongs to an owner of the lock, else nil.
local function holder_of()
  local record = redis.call('get', holder)
  if not record then return nil end
  local f = {}
  for v in string.gmatch(record .. '\31', '([^\31]*)\31') do f[#f + 1] = v end
  if redis.call('hexists', key, f[1]) == 0 then return nil end
  return {f[1], f[2] or '', f[3] or '', f[4] or '', f[6] or '', f[5] or ''}
end
-- Grants the (free) lock to the first waiter whose deadline has not passed, dropping dead
-- ones. `grant` says:
--   now:     the Redis clock in ms (now_ms());
--   skip:    the queue member not to publish the grant to (the caller; '' for none);
--   publish: the publish command ('publish', or 'spublish' on a Cluster).
-- Publishes GRANT_PREFIX .. '<owner>:<token>' on the channel unless the grantee is `skip`.
-- Returns member, token or nil.
local function grant_next(grant)
  for _ = 1, 64 do
    local head = redis.call('zrange', queue, 0, 0)[1]
    if not head then return nil end
    local deadline = tonumber(redis.call('zscore', deadlines, head) or '0')
    redis.call('zrem', queue, head)
    redis.call('zrem', deadlines, head)
    if deadline > grant.now then
      local sep = string.find(head, '|', 1, true)
      local lease, owner, meta = string.sub(head, 1, sep - 1), string.sub(head, sep + 1), ''
      local sep2 = string.find(owner, '|', 1, true)
      if sep2 then
        owner, meta = string.sub(owner, 1, sep2 - 1), string.sub(owner, sep2 + 1)
      end
      redis.call('hset', key, owner, 1)
      redis.call('pexpire', key, lease)
      set_holder(owner, meta, grant.now, lease)
      local token = next_token()
      if head ~= grant.skip then
        -- '%d': `..` would print a token above 10^14 as '1.79e+15'.
        redis.call(grant.publish, channel, GRANT_PREFIX .. owner .. ':' .. string.format('%d', token))
      end
      return head, token
    end
  end
  return nil
end
