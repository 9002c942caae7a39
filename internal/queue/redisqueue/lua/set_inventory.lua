-- set_inventory.lua: record the units a room's sale has left
-- (queue.Store.SetInventory).
-- KEYS[1] meta hash
-- ARGV    units, the default visitors_per_unit (written only when the
--         room's hash lacks it: a room written before the setting existed)
-- Returns 0 when the room does not exist, else 1, having published the
-- room's name on <prefix>wake.
local meta = KEYS[1]
local units, default_per_unit = ARGV[1], ARGV[2]

if redis.call('EXISTS', meta) == 0 then
  return 0
end
redis.call('HSETNX', meta, 'visitors_per_unit', default_per_unit)
redis.call('HSET', meta, 'inventory', units)
-- Every instance's view re-reads the room (queue.Waker): <prefix>wake.
local prefix, name = string.match(meta, '^(.*){(.*)}:meta$')
redis.call('PUBLISH', prefix .. 'wake', name)
return 1
