-- leave.lua: take a visitor out of its shard (Store.Leave): out of the
-- line, out of the shard's copy of the admitted, and out of the record of
-- the step in flight that took it (the taken hash names it), so that
-- neither reclaim.lua nor ack.lua puts it back in line or notes it as
-- admitted.
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
local id = redis.call('HGET', taken, visitor)
if id then
  redis.call('HDEL', taken, visitor)
  found = 1
  local rec = redis.call('HGET', smeta, 't:' .. id)
  if rec then
    local pairs, kept = cmsgpack.unpack(rec), {}
    for j = 1, #pairs, 2 do
      if pairs[j + 1] ~= visitor then
        kept[#kept + 1] = pairs[j]
        kept[#kept + 1] = pairs[j + 1]
      end
    end
    redis.call('HSET', smeta, 't:' .. id, cmsgpack.pack(kept))
  end
end
return math.min(found, 1)
