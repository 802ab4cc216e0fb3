-- INSPECT: a consistent snapshot of one lock; reads only.
-- KEYS: key, queue, deadlines, and fence under Redlock only.
-- ARGV: none.
-- Returns {type of the lock key, the lock's owners and hold counts (HGETALL without the
-- holder record), pttl, the holder's fencing token (0: none), live waiters, holder fields
-- (owner, service, host, pid, acquired-at ms, request id) or {}}.
-- @prelude
local kind = redis.call('type', key).ok
local owners, record = {}, nil
if kind == 'hash' then
  local fields = redis.call('hgetall', key)
  for i = 1, #fields, 2 do
    if fields[i] == HOLDER_FIELD then
      record = fields[i + 1]
    else
      owners[#owners + 1] = fields[i]
      owners[#owners + 1] = fields[i + 1]
    end
  end
end
local waiters = redis.call('zcount', deadlines, '(' .. ms_of(redis.call('time')), '+inf')
return {kind, owners, redis.call('pttl', key), token_of(record), waiters, holder_fields(record)}
