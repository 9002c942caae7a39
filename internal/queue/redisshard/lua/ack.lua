-- ack.lua: end a step's record on a shard once commit.lua has answered
-- (Store.Admit): note the visitors it admitted in the shard's copy (so
-- that enter.lua and status.lua answer "admitted" without the home
-- shard), and put back in line, with their scores, those it did not admit
-- (the compensation).
-- KEYS[1] wait zset, KEYS[2] shard meta hash, KEYS[3] leases zset, KEYS[4]
-- admitted zset
-- ARGV    step id, now (ms), expires_ms, the number b of visitors to put
--         back, then b score/visitor pairs, then the admitted visitors
-- Returns the number put back. A visitor who entered again meanwhile
-- keeps the lower (earlier) of its two scores.
local wait, smeta, leases, admitted = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id, now, exp, b = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
redis.call('HDEL', smeta, 't:' .. id)
redis.call('ZREM', leases, id)
local back = {}
for i = 5, 4 + 2 * b do
  back[#back + 1] = ARGV[i]
end
for i = 1, #back, 2000 do
  redis.call('ZADD', wait, 'LT', unpack(back, i, math.min(i + 1999, #back)))
end
redis.call('ZREMRANGEBYSCORE', admitted, '-inf', now)
local adm = {}
for i = 5 + 2 * b, #ARGV do
  adm[#adm + 1] = exp
  adm[#adm + 1] = ARGV[i]
end
for i = 1, #adm, 2000 do
  redis.call('ZADD', admitted, unpack(adm, i, math.min(i + 1999, #adm)))
end
return b
