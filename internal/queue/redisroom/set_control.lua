-- set_control.lua: store the controller's next state over the one it read
-- (queue.Store.SetControl).
-- KEYS[1] meta hash, KEYS[2] signals hash
-- ARGV    the version read, the number of control fields n, then n
--         name/value pairs (queue.ControlFields), then the used signals as
--         name/value pairs to take out of the pool
-- Returns -1 when the room does not exist, 0 when another step came first,
-- 1 when stored (rules_v bumped: limits.lua).
local meta, signals = KEYS[1], KEYS[2]
if redis.call('EXISTS', meta) == 0 then
  return -1
end
local version = tonumber(redis.call('HGET', meta, 'ctl_version')) or 0
if version ~= tonumber(ARGV[1]) then
  return 0
end
local n = tonumber(ARGV[2])
redis.call('HSET', meta, unpack(ARGV, 3, 2 + 2 * n))
redis.call('HINCRBY', meta, 'rules_v', 1)
for i = 3 + 2 * n, #ARGV, 2 do
  if redis.call('HINCRBY', signals, ARGV[i], -tonumber(ARGV[i + 1])) <= 0 then
    redis.call('HDEL', signals, ARGV[i])
  end
end
return 1
