------------------------------------------------------------------------------------------
-- Registration: each function once as it is (one server, Sentinel, Redlock) and, for a
-- Cluster, a variant behind the migration guard. The calls of `register` end the library:
-- lock-core writes them from its table of functions (protocol/library.rs).

-- Not while the lock's slot is being migrated to another Cluster node (resharding): there
-- Redis serves a key only on the node that has it, so a function could stop half-way, its
-- first writes done, at a key it has just emptied (the source refuses it), or read a key
-- still on the other node as missing (the target serves it). EXISTS of two keys of the slot
-- that never exist fails on both nodes (ASK on the source, TRYAGAIN on the target) and
-- answers anywhere else: before any write, the call answers TRYAGAIN, which the client
-- retries until the slot has moved.
local function migrating(key)
  local tag = '{' .. key .. '}'
  local probe = redis.pcall('exists', 'distlock__absent:' .. tag, 'distlock__absent2:' .. tag)
  if type(probe) == 'table' then
    return redis.error_reply('TRYAGAIN the slot of ' .. key .. ' is being migrated')
  end
end

-- The Cluster variant of an operation of one lock: `callback` behind the migration guard.
local function guarded(callback)
  return function(keys, args)
    on_cluster = true
    local refused = migrating(keys[1])
    if refused then return refused end
    return callback(keys, args)
  end
end

-- Registers `callback` as PREFIX .. `name`, and `cluster` (nil for none) as its Cluster
-- variant, named with CLUSTER_SUFFIX. A function that may write is refused under OOM unless
-- flagged `allow-oom`: those that only end or extend holds have it, so a full server can
-- still let its locks go.
local function register(name, callback, flags, cluster)
  redis.register_function{function_name = PREFIX .. name, callback = callback, flags = flags}
  if cluster then
    redis.register_function{
      function_name = PREFIX .. name .. CLUSTER_SUFFIX, callback = cluster, flags = flags}
  end
end
