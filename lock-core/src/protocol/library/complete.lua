------------------------------------------------------------------------------------------
-- Idempotency keys: a request's record stored as its exclusive hold ends.

-- COMPLETE: stores an idempotency record and releases its in-flight hold, in one step, and
-- only while the hold is still the one its caller was granted (see `is_current`). Keys: the
-- lock, its queue, the record (a key of the lock's slot; records are not kept under
-- Redlock). Arguments: owner, token (its text), lease_ms, publish, the record's value and
-- retention. Answers NOT_HELD when `owner` no longer holds the lock with `token`: nothing
-- stored or released. Else the record is stored and the hold ended as RELEASE ends it.
local function complete(keys, args)
  local key, queue, record = keys[1], keys[2], keys[3]
  local owner, token, lease_ms, publish, value, retention_ms =
    args[1], args[2], args[3], args[4], args[5], args[6]
  local held = redis.call('hmget', key, owner, HOLDER_FIELD)
  local count = tonumber(held[1] or '0')
  if count <= 0 or not is_current(held[2], owner, token) then
    return NOT_HELD
  end
  redis.call('set', record, value, 'px', retention_ms)
  return end_hold(key, queue, nil, held[2], publish, owner, count, lease_ms)
end
