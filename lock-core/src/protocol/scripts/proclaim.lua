-- PROCLAIM: an election's leader announces its term, with the value it proclaims (its
-- address, say) or none. The value is a field of the lock hash (VALUE_FIELD, generated),
-- so it lives and dies with the term.
-- KEYS: key, queue (only the lock is touched).
-- ARGV: owner, value ('' for none), publish ('publish' or 'spublish').
-- Returns 1 when the owner leads (the value set and LEADER_MESSAGE published on the lock's
-- channel: observers read the leader again, waiters retry once), else 0.
if redis.call('hexists', key, owner) == 0 then return 0 end
if value == '' then
  redis.call('hdel', key, VALUE_FIELD)
else
  redis.call('hset', key, VALUE_FIELD, value)
end
redis.call(publish, CHANNEL_PREFIX .. '{' .. key .. '}', LEADER_MESSAGE)
return 1
