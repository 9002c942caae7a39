-- pop.lua: take up to n visitors with scores up to max from the head of a
-- shard's line for an admission step, and record them under the step's id
-- until ack.lua (reclaim.lua puts them back if it never comes).
-- KEYS[1] wait zset, KEYS[2] shard meta hash, KEYS[3] leases zset
-- ARGV    now (ms), step id, lease end (ms), n, max score ("+inf" for any)
-- Returns {visitor, score, …} in the shard's order.
local wait, smeta, leases = KEYS[1], KEYS[2], KEYS[3]
local now, id, lease_end, n, max = tonumber(ARGV[1]), ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
reclaim(wait, smeta, leases, now)
local got = redis.call('ZRANGEBYSCORE', wait, '-inf', max, 'WITHSCORES', 'LIMIT', 0, n)
if #got == 0 then
  return {}
end
local taken, members = {}, {}
for i = 1, #got, 2 do
  taken[#taken + 1] = got[i + 1]
  taken[#taken + 1] = got[i]
  members[#members + 1] = got[i]
end
for i = 1, #members, 4000 do
  redis.call('ZREM', wait, unpack(members, i, math.min(i + 3999, #members)))
end
redis.call('HSET', smeta, 't:' .. id, cmsgpack.pack(taken))
redis.call('ZADD', leases, lease_end, id)
return got
