------------------------------------------------------------------------------------------
-- Guarded writes: commands that commit only while a hold is current.

-- The record of `owner`'s hold of kind `mode` (a kind's letter) on `key`, or nil: an
-- exclusive lock's, a writer's, or a live permit's (its records in `holders`).
local function hold_record(key, holders, owner, mode)
  if mode == PERMIT then
    local expiry = redis.call('zscore', key, owner)
    if not expiry or tonumber(expiry) <= ms_of(redis.call('time')) then return nil end
    return redis.call('hget', holders, owner)
  elseif mode == WRITE then
    return redis.call('hget', key, record_field(owner))
  end
  return redis.call('hget', key, HOLDER_FIELD)
end

-- GUARDED_WRITE: runs a list of commands if and only if `owner` still holds the lock with
-- `token` (see `is_current`) — an exclusive lock (EXCLUSIVE), a read-write lock's writer
-- (WRITE) or a semaphore's permit (PERMIT, its records in `holders`) — all in this one
-- atomic call. Keys: the lock, then for a permit its records, then every key the commands
-- write (all of the lock's slot; the client checked the commands against its allow-list).
-- Arguments: owner, token (its text), the kind's letter, the number of commands, then each
-- command as its word count and its words.
-- Returns {0} when the hold is not current (nothing ran), else {1, the commands' replies}:
-- like EXEC, every command runs, and one that fails answers its error in its place (the
-- client then fails the call with it).
local function guarded_write(keys, args)
  local key = keys[1]
  local owner, token, mode, count = args[1], args[2], args[3], tonumber(args[4])
  local holders = mode == PERMIT and keys[2]
  if not is_current(hold_record(key, holders, owner, mode), owner, token) then
    return {0}
  end
  local replies, at = {}, 5
  for n = 1, count do
    local words = tonumber(args[at])
    replies[n] = redis.pcall(unpack(args, at + 1, at + words))
    at = at + words + 1
  end
  return {1, replies}
end
