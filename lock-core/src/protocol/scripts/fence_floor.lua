-- FENCE_FLOOR (Redlock): raises the node's fence floor to at least a token, for a lease, so
-- that any later majority, which shares a node with this one, issues a greater token; the
-- floor then expires with the lease (no key outlives the lock).
-- KEYS: key, queue, fence (all three; only the fence is touched).
-- ARGV: token, lease_ms.
-- Returns 1.
if tonumber(redis.call('get', fence) or '0') < tonumber(token) then
  redis.call('set', fence, token, 'px', lease_ms)
end
return 1
