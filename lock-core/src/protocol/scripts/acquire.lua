-- ACQUIRE: takes the lock for an owner, or queues the owner as a waiter.
-- KEYS: key, queue, and fence under Redlock only.
-- ARGV: lease_ms, owner, meta (holder metadata: service, host, pid and request id joined by
--       byte 31, '' for none), waiter_ttl_ms (0: do not queue), publish ('publish' or
--       'spublish').
-- Returns {1, token} when this owner holds the lock (fresh, handed to it, or already its
-- own — acquiring is idempotent, so a retry after a lost reply is safe), else
-- {0, pttl, 0, the holder's record or nil} after queueing the caller (the client reads the
-- holder's token and fields from the record: no parsing here).
local present = redis.call('exists', key, queue)
-- The uncontended path first, inline (it is the prelude's `grant` with no floor): a free
-- lock with nobody queued costs four calls.
if present == 0 and not fence then
  local t = redis.call('time')
  local token = t[1] .. string.sub('00000' .. t[2], -6)
  local record = token .. '\31' .. owner
  if meta ~= '' then record = record .. '\31' .. meta end
  redis.call('hset', key, owner, '1', HOLDER_FIELD, record)
  redis.call('pexpire', key, lease_ms)
  return {1, tonumber(token)}
end
-- The busy path, inline too (it runs once per contended acquisition): both keys there
-- means held, so no second EXISTS; the caller's count and the record in one HMGET.
local t = redis.call('time')
local me = lease_ms .. '|' .. owner .. '|' .. meta
local record
if present == 2 or (present == 1 and redis.call('exists', key) == 1) then
  local mine = redis.call('hmget', key, owner, HOLDER_FIELD)
  if mine[1] then
    -- Already ours (a retry after a lost reply).
    redis.call('pexpire', key, lease_ms)
    return {1, tonumber(mine[2] and string.match(mine[2], '^%d+') or '0')}
  end
  record = mine[2]
else
  -- Free with waiters queued (a lease ran out, or a grant is being taken up): the first
  -- live waiter gets it, maybe the caller.
-- @prelude: this block
  local floor = floor_of(0)
  local head, token = grant_next(t, floor, me, publish)
  if head == me then
    return {1, token}
  end
  if not head then
    return {1, grant(owner, meta, lease_ms, t, floor)}
  end
  record = redis.call('hget', key, HOLDER_FIELD)
end
local ttl = tonumber(waiter_ttl_ms)
if ttl > 0 then
  -- The prelude's `enqueue`, inline: queued by arrival, or refreshed (its place kept).
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  -- @inline queue_waiter
end
-- The holder's token is read from its record by the client: a grant with a token not
-- above it was already superseded.
return {0, redis.call('pttl', key), 0, record}
