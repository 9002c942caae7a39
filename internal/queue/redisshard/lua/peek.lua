-- peek.lua: the head of a shard's line, for the K-way merge of an
-- admission step (Store.Admit); first puts back what crashed steps took
-- (reclaim.lua).
-- KEYS[1] wait zset, KEYS[2] shard meta hash, KEYS[3] leases zset, KEYS[4]
-- taken hash
-- ARGV    now (ms), n
-- Returns {visitor, score, …}: the first n in the shard's line.
local wait, smeta, leases, taken = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now, n = tonumber(ARGV[1]), tonumber(ARGV[2])
reclaim(wait, smeta, leases, taken, now)
return redis.call('ZRANGE', wait, 0, n - 1, 'WITHSCORES')
