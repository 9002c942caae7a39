-- leave.lua: remove a visitor's queue place or active slot (queue.Store.Leave).
-- KEYS[1] meta hash, KEYS[2] wait zset, KEYS[3] active zset, KEYS[4]
-- pre-queue zset (draw.lua), KEYS[5] seen, KEYS[6] parked and KEYS[7] back
-- zsets (presence.lua), KEYS[8] priority lane zset
-- ARGV    visitor, draw key, draw commitment (as enter.lua)
-- Returns 0 when the room does not exist, 5 when the room's pre-queue needs
-- the key, else 1.
local meta, wait, active, pre, seen, parked, back =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local visitor, key, commitment = ARGV[1], ARGV[2], ARGV[3]

if redis.call('EXISTS', meta) == 0 then
  return 0
end
if redis.call('EXISTS', pre) == 1 then
  if commitment ~= redis.call('HGET', meta, 'draw_commitment') then
    return 5
  end
  redis.call('ZREM', pre, key .. visitor)
end
redis.call('ZREM', wait, visitor)
redis.call('ZREM', KEYS[8], visitor)
redis.call('ZREM', seen, visitor)
redis.call('ZREM', parked, visitor)
redis.call('ZREM', back, visitor)
redis.call('ZREM', active, visitor)
return 1
