-- leave.lua: remove a visitor's queue place or active slot (queue.Store.Leave).
-- KEYS[1] meta hash, KEYS[2] wait zset, KEYS[3] active zset
-- ARGV    visitor
-- Returns 0 when the room does not exist, else 1.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return 1
