-- MULTI_ACQUIRE: takes several free locks of one slot at once for one owner, or none of them:
-- a multi-lock's uncontended path (acquire.lua's, for each lock). Not under Redlock.
-- KEYS: each lock's key and queue, in that order (2 per lock, not the one-lock order of
--       the other scripts).
-- ARGV: lease_ms, owner, meta (holder metadata, '' for none).
-- Returns {1, token} when every lock was free with nobody queued (all taken, with one token:
-- the Redis clock, above any earlier token of names whose state is all gone), else {0, i}:
-- lock i is held or has waiters, and nothing was taken (the caller takes them one by one).
-- No migration guard: on a slot mid-migration Redis runs it only where all its keys exist,
-- and then it answers the first lock busy without writing.
local lease_ms = ARGV[1]
local owner = ARGV[2]
local meta = ARGV[3]
for i = 1, #KEYS, 2 do
  if redis.call('exists', KEYS[i], KEYS[i + 1]) ~= 0 then
    return {0, (i + 1) / 2}
  end
end
local t = redis.call('time')
local token = t[1] .. string.sub('00000' .. t[2], -6)
local record = token .. '\31' .. owner
if meta ~= '' then record = record .. '\31' .. meta end
for i = 1, #KEYS, 2 do
  redis.call('hset', KEYS[i], owner, '1', HOLDER_FIELD, record)
  redis.call('pexpire', KEYS[i], lease_ms)
end
return {1, tonumber(token)}
