-- set_limits.lua: store a room's queue.Limits, computed from the inputs
-- its hash held at rules_v (redisqueue's and redisshard's RefreshLimits).
-- KEYS[1] meta hash
-- ARGV    the rules_v read, then the limits as name/value pairs
--         (queue.Limits.LimitFields)
-- Returns -1 when the room does not exist, 0 when an input was written
-- since (its writer stores the limits again), 1 when stored.
local meta = KEYS[1]
if redis.call('HEXISTS', meta, 'state') == 0 then
  return -1
end
if (redis.call('HGET', meta, 'rules_v') or '0') ~= ARGV[1] then
  return 0
end
redis.call('HSET', meta, 'lim_v', ARGV[1], unpack(ARGV, 2))
return 1
