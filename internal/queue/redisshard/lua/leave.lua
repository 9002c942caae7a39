-- leave.lua: take a visitor out of its shard (Store.Leave): out of the
-- line, out of the shard's copy of the admitted, and out of the record of
-- the step in flight that took it (its field of the taken hash: reclaim.lua
-- and ack.lua act only on the visitors the taken hash names the step
-- for), so that neither puts it back in line or notes it as admitted.
-- KEYS[1] wait zset, KEYS[2] shard meta hash, KEYS[3] admitted zset,
-- KEYS[4] taken hash
-- ARGV    visitor
-- Returns -1 when the shard has no copy of the room's state (the room
-- does not exist), else 1 when the visitor was in any of them, else 0.
local wait, smeta, admitted, taken = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local visitor = ARGV[1]
if redis.call('HEXISTS', smeta, 'state') == 0 then
  return -1
end
local found = redis.call('ZREM', wait, visitor) + redis.call('ZREM', admitted, visitor)
found = found + redis.call('HDEL', taken, visitor)
return math.min(found, 1)
