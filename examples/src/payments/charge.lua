-- CHARGE: the payment service's one effect, fenced by the idempotency key's token.
-- KEYS: charge (`payments:charge:{<key>}`, the token of the charge made for the key), ledger
-- ARGV: token, entry (the ledger line), ttl_ms (the retention: no key lives for ever)
-- Returns 1 when charged now, 0 when this key was charged before under a lower or equal
-- token (the same payment: answer it again), -1 when a newer holder of the key charged it
-- (this holder is stale: answer nothing of it).
local token = tonumber(ARGV[1])
local charged = tonumber(redis.call('get', KEYS[1]) or '0')
if charged > token then
  return -1
end
if charged > 0 then
  return 0
end
redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3])
redis.call('rpush', KEYS[2], ARGV[2])
redis.call('pexpire', KEYS[2], ARGV[3])
return 1
