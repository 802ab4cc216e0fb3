-- Not while the lock's slot is being migrated to another Cluster node (resharding): there
-- Redis serves a key only on the node that has it, so a script could stop half-way, its
-- first writes done, at a key it has just emptied (the source refuses it), or read a key
-- still on the other node as missing (the target serves it). EXISTS of two keys of the slot
-- that never exist fails on both nodes (ASK on the source, TRYAGAIN on the target) and
-- answers anywhere else: before any write, the script answers TRYAGAIN, which the client
-- retries until the slot has moved.
do
  local tag = '{' .. key .. '}'
  local probe = redis.pcall('exists', 'distlock__absent:' .. tag, 'distlock__absent2:' .. tag)
  if type(probe) == 'table' then
    return redis.error_reply('TRYAGAIN the slot of ' .. key .. ' is being migrated')
  end
end
