-- RENEW: renews a batch of locks in one call (the watchdog's tick, or one extension).
-- KEYS: the n locks (not the one-lock order of the other scripts: this one takes many
--       locks, all in one slot). Their holder records go along with them.
-- ARGV: owner, lease_ms and mode code of each lock, in order (3n values). The codes:
--       'x' a lock, 'w' a writer, 'r' a reader, 's' a semaphore's permit.
-- For each hold its owner still has, raises its TTL to at least the lease (never shortens
-- it) and answers the resulting TTL in ms; answers 0 for a hold the owner lost.
-- Returns the n answers in order. The renewers take the lease as a number (`lease_ms`) and,
-- to hand to redis.call, as sent (`lease`): a number given to redis.call is formatted anew
-- on every call.

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

-- A reader of a read-write lock: its field, and its timeout key (Redisson's
-- `{<key>}:<owner>:rwlock_timeout:<n>`; distlock holds once per owner, n = 1). The hash
-- lives as long as its longest hold.
local function renew_reader(key, owner, lease_ms, lease)
  if redis.call('hexists', key, owner) == 0 then return 0 end
  local timeout = '{' .. key .. '}:' .. owner .. ':rwlock_timeout:1'
  if redis.call('pexpire', timeout, lease) == 0 then return 0 end
  if redis.call('pttl', key) < lease_ms then
    redis.call('pexpire', key, lease)
  end
  return lease_ms
end

-- A permit of a semaphore: its expiry in the ZSET moves to now + lease (never back); the
-- ZSET and the records hash (HOLDERS_PREFIX, generated) live until the latest permit.
local function renew_permit(key, owner, lease_ms)
  local expiry = tonumber(redis.call('zscore', key, owner) or '0')
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if expiry <= now then return 0 end
  if expiry < now + lease_ms then
    expiry = now + lease_ms
    redis.call('zadd', key, string.format('%d', expiry), owner)
  end
  if redis.call('pttl', key) < expiry - now then
    local ttl = string.format('%d', expiry - now)
    redis.call('pexpire', key, ttl)
    redis.call('pexpire', HOLDERS_PREFIX .. '{' .. key .. '}', ttl)
  end
  return expiry - now
end

-- On a Cluster (SHARDED, generated), a reader's or a permit's renewal also touches a key
-- it does not declare (the reader's timeout key, the permits' records), which a slot
-- mid-migration may hold on the other node: then the migration guard first. A lock's or a
-- writer's renewal touches its own key only.
local key = KEYS[1]
for i = 3, SHARDED and #ARGV or 0, 3 do
  if ARGV[i] == 'r' or ARGV[i] == 's' then
-- @migrating
    break
  end
end

local renewers = {x = renew_field, w = renew_field, r = renew_reader, s = renew_permit}
local out = {}
for i = 1, #KEYS do
  local owner, lease, code = ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i]
  out[i] = renewers[code](KEYS[i], owner, tonumber(lease), lease)
end
return out
