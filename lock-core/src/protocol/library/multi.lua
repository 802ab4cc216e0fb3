------------------------------------------------------------------------------------------
-- Many exclusive locks of one slot at once.

-- MULTI_ACQUIRE: takes several free locks of one slot at once for one owner, or none: a
-- multi-lock's uncontended path. Not under Redlock. Keys: each lock's key and queue.
-- Returns {1, token} when every lock was free with nobody queued (all taken, one token),
-- else {0, i}: lock i is held or has waiters, and nothing was taken.
local function multi_acquire(keys, args)
  local lease_ms, owner, meta = args[1], args[2], args[3]
  for i = 1, #keys, 2 do
    if redis.call('exists', keys[i], keys[i + 1]) ~= 0 then
      return {0, (i + 1) / 2}
    end
  end
  local token = micros_text(redis.call('time'))
  for i = 1, #keys, 2 do
    grant(keys[i], owner, meta, lease_ms, token)
  end
  return {1, tonumber(token)}
end
