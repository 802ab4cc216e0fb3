------------------------------------------------------------------------------------------
-- Every kind

-- INSPECT (reads only): a consistent snapshot of one lock of any kind; keys: the lock and
-- the queue of the kind to count waiters in. Returns {type of the lock key, the owners and
-- hold counts (for a lock or read-write lock its hash's counts, for a semaphore each live
-- permit's owner with 1), pttl, the holder's fencing token (0: none), live waiters, holder
-- fields or {}, the hash's `mode` ('read' or 'write'; 'permit' for a semaphore; '' else),
-- and for the last two every holder as owner, token, TTL ms, n and n holder fields,
-- flattened}.
local function inspect(keys)
  local key, queue = keys[1], keys[2]
  local kind = redis.call('type', key).ok
  local now = ms_of(redis.call('time'))
  local owners, record, mode, holdings = {}, nil, '', {}
  local function holding(owner, rec, ttl)
    local fields = holder_fields(rec)
    holdings[#holdings + 1] = owner
    holdings[#holdings + 1] = token_of(rec)
    holdings[#holdings + 1] = ttl
    holdings[#holdings + 1] = #fields
    for _, v in ipairs(fields) do holdings[#holdings + 1] = v end
  end
  local records_key = HOLDERS_PREFIX .. '{' .. key .. '}'
  if kind == 'hash' then
    local fields = redis.call('hgetall', key)
    local records, prefix = {}, HOLDER_FIELD .. ':'
    for i = 1, #fields, 2 do
      local f, v = fields[i], fields[i + 1]
      if f == HOLDER_FIELD then
        record = v
      elseif string.sub(f, 1, #prefix) == prefix then
        records[string.sub(f, #prefix + 1)] = v
      elseif f == 'mode' then
        mode = v
      else
        owners[#owners + 1] = f
        owners[#owners + 1] = v
      end
    end
    if mode ~= '' then
      local ttl = redis.call('pttl', key)
      for i = 1, #owners, 2 do
        local o = owners[i]
        local own_ttl = ttl
        if not is_writer(o) then
          own_ttl = redis.call('pttl', timeout_key(key, o, owners[i + 1]))
        end
        holding(o, records[o], own_ttl)
        if not record or is_writer(o) then record = records[o] end
      end
    end
  elseif kind == 'zset' and redis.call('exists', records_key) == 1 then
    -- A semaphore (any other ZSET has no records beside it).
    mode = 'permit'
    local permits = redis.call('zrangebyscore', key, '(' .. now, '+inf', 'WITHSCORES')
    for i = 1, #permits, 2 do
      local rec = redis.call('hget', records_key, permits[i])
      owners[#owners + 1] = permits[i]
      owners[#owners + 1] = 1
      holding(permits[i], rec or nil, tonumber(permits[i + 1]) - now)
      record = record or rec or nil
    end
  end
  -- Live waiters: deadline entries (above LIVE_BASE / 2, where arrivals never reach) whose
  -- deadline has not passed.
  local waiters = redis.call('zcount', queue, LIVE_BASE / 2,
    '(' .. string.format('%d', LIVE_BASE - now))
  return {kind, owners, redis.call('pttl', key), token_of(record), waiters,
    holder_fields(record), mode, holdings}
end
