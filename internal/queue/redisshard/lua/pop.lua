-- pop.lua: take up to n visitors with scores up to max from the head of a
-- shard's line for an admission step, and record them under the step's id
-- until ack.lua (reclaim.lua puts them back if it never comes): the
-- record t:<id> in the shard's meta hash, the lease, and each visitor's
-- step and score in the taken hash, "<id>:<score>" (for enter.lua,
-- status.lua and leave.lua, which read no record).
-- KEYS[1] wait zset, KEYS[2] shard meta hash, KEYS[3] leases zset, KEYS[4]
-- taken hash
-- ARGV    now (ms), step id, lease end (ms), n, max score ("+inf" for any)
-- Returns {visitor, score, …} in the shard's order.
local wait, smeta, leases, taken = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now, id, lease_end, n, max = tonumber(ARGV[1]), ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
reclaim(wait, smeta, leases, taken, now)
local got = redis.call('ZRANGEBYSCORE', wait, '-inf', max, 'WITHSCORES', 'LIMIT', 0, n)
if #got == 0 then
  return {}
end
local rec, members, owners = {}, {}, {}
for i = 1, #got, 2 do
  rec[#rec + 1] = got[i + 1]
  rec[#rec + 1] = got[i]
  members[#members + 1] = got[i]
  owners[#owners + 1] = got[i]
  owners[#owners + 1] = id .. ':' .. got[i + 1]
end
for i = 1, #members, 4000 do
  redis.call('ZREM', wait, unpack(members, i, math.min(i + 3999, #members)))
end
for i = 1, #owners, 4000 do
  redis.call('HSET', taken, unpack(owners, i, math.min(i + 3999, #owners)))
end
redis.call('HSET', smeta, 't:' .. id, cmsgpack.pack(rec))
redis.call('ZADD', leases, lease_end, id)
return got
