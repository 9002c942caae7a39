-- leave.lua: remove a visitor's queue place or active slot (queue.Store.Leave).
-- KEYS[1] meta hash, KEYS[2] wait zset, KEYS[3] active zset
-- ARGV    visitor
-- Returns 0 when the room does not exist, else 1.
local meta, wait, active = KEYS[1], KEYS[2], KEYS[3]
local visitor = ARGV[1]

if redis.call('EXISTS', meta) == 0 then
  return 0
end
redis.call('ZREM', wait, visitor)
redis.call('ZREM', active, visitor)
return 1
