------------------------------------------------------------------------------------------
-- Renewals of holds of every kind, many locks in one call.

-- Renewers of RENEW, by the kind's letter. Each takes the lease as a number (`lease_ms`) and, to
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
local RENEWERS = {
  [EXCLUSIVE] = renew_field, [WRITE] = renew_field, [READ] = renew_reader, [PERMIT] = renew_permit}

-- RENEW: renews a batch of locks in one call (the watchdog's tick, or one extension).
-- Keys: the n locks, all in one slot. Arguments: owner, lease_ms and the letter of the
-- kind of each lock, in order (EXCLUSIVE, WRITE, READ or PERMIT, see the prelude). For
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

-- RENEW's Cluster variant takes the guard only when a renewal touches a key it does not
-- declare (a reader's timeout key, a permit's records), which a slot mid-migration may hold
-- on the other node; a lock's or a writer's renewal touches its own key only.
local function renew_cluster(keys, args)
  on_cluster = true
  for i = 3, #args, 3 do
    if args[i] == READ or args[i] == PERMIT then
      local refused = migrating(keys[1])
      if refused then return refused end
      break
    end
  end
  return renew(keys, args)
end
