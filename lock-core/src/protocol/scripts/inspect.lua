-- INSPECT: a consistent snapshot of one lock; reads only.
-- KEYS: key, fence, queue, deadlines, holder (the first five).
-- ARGV: none.
-- Returns {type of the lock key, HGETALL of the lock, pttl, last fencing token, live
-- waiters, holder record (owner, service, host, pid, acquired-at ms, request id) or {}}.
local kind = redis.call('type', key).ok
local fields = {}
if kind == 'hash' then fields = redis.call('hgetall', key) end
local record = {}
if kind == 'hash' then record = holder_of() or {} end
local waiters = redis.call('zcount', deadlines, '(' .. now_ms(), '+inf')
return {kind, fields, redis.call('pttl', key), tonumber(redis.call('get', fence) or '0'), waiters, record}
