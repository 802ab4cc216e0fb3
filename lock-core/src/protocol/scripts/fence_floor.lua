-- FENCE_FLOOR: raises the fencing counter to at least a token (Redlock: so that any later
-- majority, which shares a node with this one, issues a greater token).
-- KEYS: key, fence (the first two; only the fence is touched).
-- ARGV: token.
-- Returns 1.
local token = ARGV[1]
if tonumber(redis.call('get', fence) or '0') < tonumber(token) then
  redis.call('set', fence, token)
end
return 1
