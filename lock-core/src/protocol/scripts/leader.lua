-- LEADER: who leads an election now, in one snapshot; reads only.
-- KEYS: key, queue.
-- ARGV: none.
-- Returns {pttl, the holder's token (0: none), the holder's owner ('' : none), 1 when a
-- value is proclaimed else 0, the value or '', then the holder fields (owner, service,
-- host, pid, acquired-at ms, request id) when its record has them}.
-- @prelude
local record = redis.call('hget', key, HOLDER_FIELD)
local value = redis.call('hget', key, VALUE_FIELD)
local owner = record and string.match(record, '^%d+\31([^\31]*)') or ''
local out = {redis.call('pttl', key), token_of(record), owner, value and 1 or 0, value or ''}
for _, v in ipairs(holder_fields(record)) do out[#out + 1] = v end
return out
