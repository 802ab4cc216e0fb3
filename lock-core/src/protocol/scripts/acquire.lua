-- ACQUIRE: takes the lock for an owner, or queues the owner as a waiter.
-- KEYS: key, fence, queue, deadlines, holder, channel (all six).
-- ARGV: lease_ms, owner, waiter_ttl_ms (0: do not queue), meta (holder metadata, '' for
--       none), publish ('publish' or 'spublish').
-- Returns {1, token} when this owner holds the lock (fresh, handed to it, or already its
-- own — acquiring is idempotent, so a retry after a lost reply is safe), else
-- {0, pttl, fencing counter} after queueing the caller, followed by the holder's owner,
-- service, host, pid, acquired-at (ms) and request id when its record is there.
local lease_ms = ARGV[1]
local owner = ARGV[2]
local waiter_ttl_ms = tonumber(ARGV[3])
local meta = ARGV[4]
local publish = ARGV[5]
local me = member(lease_ms, owner, meta)
-- The uncontended path first: a free lock with nobody queued costs seven calls.
local now = nil
if redis.call('exists', key) == 0 then
  local head, token = nil, nil
  if redis.call('zcard', queue) > 0 then
    now = now_ms()
    head, token = grant_next({now = now, skip = me, publish = publish})
  end
  if head == me then
    return {1, token}
  end
  if not head then
    redis.call('hincrby', key, owner, 1)
    redis.call('pexpire', key, lease_ms)
    set_holder(owner, meta, now, lease_ms)
    return {1, next_token()}
  end
elseif redis.call('hexists', key, owner) == 1 then
  -- Already ours (a retry after a lost reply): the record, if any, is ours too.
  redis.call('pexpire', key, lease_ms)
  redis.call('pexpire', holder, lease_ms)
  return {1, tonumber(redis.call('get', fence) or '0')}
end
now = now or now_ms()
if waiter_ttl_ms > 0 then
  redis.call('zadd', queue, 'NX', now, me)
  redis.call('zadd', deadlines, now + waiter_ttl_ms, me)
  redis.call('pexpire', queue, waiter_ttl_ms)
  redis.call('pexpire', deadlines, waiter_ttl_ms)
end
-- The fencing counter now: a grant with a token not above it was already superseded.
local busy = {0, redis.call('pttl', key), tonumber(redis.call('get', fence) or '0')}
for _, v in ipairs(holder_of() or {}) do busy[#busy + 1] = v end
return busy
