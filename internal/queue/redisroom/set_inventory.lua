-- set_inventory.lua: record the units a room's sale has left
-- (queue.Store.SetInventory).
-- KEYS[1] meta hash
-- ARGV    units
-- Returns 0 when the room does not exist, else 1, having bumped rules_v
-- (the stored queue.Limits are now older than their inputs), and state_v
-- where the hash has one (a sharded room's: its line shards' copies of
-- its state, which the inventory can make sold_out, follow it), and
-- published the room's name on <prefix>wake.
local meta = KEYS[1]
local units = ARGV[1]

if redis.call('EXISTS', meta) == 0 then
  return 0
end
redis.call('HSET', meta, 'inventory', units)
redis.call('HINCRBY', meta, 'rules_v', 1)
if redis.call('HEXISTS', meta, 'state_v') == 1 then
  redis.call('HINCRBY', meta, 'state_v', 1)
end
-- Every instance's view re-reads the room (queue.Waker): <prefix>wake.
local prefix, name = string.match(meta, '^(.*){(.*)}:meta$')
redis.call('PUBLISH', prefix .. 'wake', name)
return 1
