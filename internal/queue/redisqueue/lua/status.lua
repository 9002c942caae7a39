-- status.lua: a visitor's exact entry, renewing an active one (queue.Store.Status).
-- KEYS[1] meta hash, KEYS[2] wait zset (seq), KEYS[3] active zset (expiry ms)
-- ARGV    visitor, now (unix ms)
-- Returns {kind, seq, position, expires_ms}; kind 0 = room not found,
-- 2 = waiting, 3 = active, 4 = gone.
local meta, wait, active = KEYS[1], KEYS[2], KEYS[3]
local visitor, now = ARGV[1], tonumber(ARGV[2])

local ttl = redis.call('HGET', meta, 'active_ttl')
if not ttl then
  return {0}
end

local exp = tonumber(redis.call('ZSCORE', active, visitor))
if exp then
  if exp > now then
    local renewed = now + math.floor(tonumber(ttl) / 1e6)
    if renewed > exp then
      redis.call('ZADD', active, renewed, visitor)
      exp = renewed
    end
    return {3, 0, 0, exp}
  end
  redis.call('ZREM', active, visitor)
end
local seq = redis.call('ZSCORE', wait, visitor)
if seq then
  return {2, tonumber(seq), redis.call('ZRANK', wait, visitor) + 1, 0}
end
return {4}
