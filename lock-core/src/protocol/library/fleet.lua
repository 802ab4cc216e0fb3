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
