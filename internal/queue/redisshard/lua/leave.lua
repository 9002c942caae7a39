-- leave.lua: take a visitor out of its shard (Store.Leave): out of the
-- line, out of the shard's copy of the admitted, and out of the records of
-- steps in flight, so that reclaim.lua does not put it back in line.
-- KEYS[1] wait zset, KEYS[2] shard meta hash, KEYS[3] leases zset, KEYS[4]
-- admitted zset
-- ARGV    visitor
-- Returns 1 when the visitor was in any of them, else 0.
local wait, smeta, leases, admitted = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local visitor = ARGV[1]
local found = redis.call('ZREM', wait, visitor) + redis.call('ZREM', admitted, visitor)
local steps = redis.call('ZRANGE', leases, 0, -1)
for i = 1, #steps do
  local taken = redis.call('HGET', smeta, 't:' .. steps[i])
  if taken then
    local pairs, kept = cmsgpack.unpack(taken), {}
    for j = 1, #pairs, 2 do
      if pairs[j + 1] == visitor then
        found = 1
      else
        kept[#kept + 1] = pairs[j]
        kept[#kept + 1] = pairs[j + 1]
      end
    end
    if #kept < #pairs then
      redis.call('HSET', smeta, 't:' .. steps[i], cmsgpack.pack(kept))
    end
  end
end
return math.min(found, 1)
