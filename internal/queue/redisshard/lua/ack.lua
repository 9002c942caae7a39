-- ack.lua: end a step's record on a shard once commit.lua has answered
-- (Store.Admit): note the visitors it admitted in the shard's copy (so
-- that enter.lua and status.lua answer "admitted" without the home
-- shard), and put back in line, with their scores, those it did not admit
-- (the compensation).
-- KEYS[1] wait zset, KEYS[2] shard meta hash, KEYS[3] leases zset, KEYS[4]
-- admitted zset, KEYS[5] taken hash
-- ARGV    step id, now (ms), the number b of visitors to put back, then b
--         score/visitor pairs, then expiry/visitor pairs of the admitted:
--         those the commit made active and those it found active already
--         (dropped: a duplicate of a step whose ack was lost), each with
--         the end of its slot
-- Returns the number put back.
--
-- It acts only on the visitors still in the step's record, those the
-- taken hash still names the step for: one who left meanwhile (leave.lua
-- removed its field) is neither put back nor noted as
-- admitted; a record already reclaimed (the step was slower than its
-- lease: its visitors are back in line) is left to the next commit.lua,
-- which drops those it made active, and to that step's ack.lua, which
-- notes them here with the end of their slots.
local wait, smeta, leases, admitted, taken = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id, now, b = ARGV[1], ARGV[2], tonumber(ARGV[3])
redis.call('ZREM', leases, id)
local held, recorded = take_record(smeta, taken, id)
if not recorded then
  return 0
end
local n = 0
for i = 4, 2 + 2 * b, 2 do
  local v = ARGV[i + 1]
  if held[v] then
    redis.call('ZADD', wait, 'LT', held[v], v)
    n = n + 1
  end
end
redis.call('ZREMRANGEBYSCORE', admitted, '-inf', now)
for i = 4 + 2 * b, #ARGV, 2 do
  local v = ARGV[i + 1]
  if held[v] then
    redis.call('ZADD', admitted, ARGV[i], v)
    redis.call('ZREM', wait, v)
  end
end
return n
