-- commit.lua: the last home call of an admission step (Store.Admit): make
-- the visitors the step took from the shards active, within the step's
-- reservation, and end it.
-- KEYS[1] home meta hash, KEYS[2] active zset, KEYS[3] resv zset
-- ARGV    now (ms), step id, then the visitors in admission order
-- Returns {expires_ms, flag..., expiry...}, one flag per visitor: 1
-- admitted, 0 already active (dropped: a duplicate left by a crashed step
-- or a lost ack, or a visitor who entered again), 2 not admitted: the
-- caller puts it back in its shard's line; then, for each visitor flagged
-- 0 in order, when its slot lapses (ms), which ack.lua notes in the
-- shard's copy as for one admitted now.
--
-- The cap and the rate are checked again here, not trusted from
-- reserve.lua: when the reservation's lease has passed (a step slower
-- than its lease), its slots may have gone to another step, so the slots
-- are counted afresh and tokens taken from the bucket. A room no longer
-- open (state set and not open: paused since the reservation) admits
-- nobody: every visitor goes back.
local meta, active, resv = KEYS[1], KEYS[2], KEYS[3]
local now, id = tonumber(ARGV[1]), ARGV[2]

local max_active, batch, tokens, refilled, _, ttl, state = open_bucket(meta, active, now, 'active_ttl_ms', 'state')
if not max_active then
  return {-1}
end
local own = tonumber(redis.call('HGET', meta, 'r:' .. id))
if own then
  redis.call('HDEL', meta, 'r:' .. id)
  redis.call('ZREM', resv, id)
end
local free = max_active - redis.call('ZCARD', active) - held(meta, resv, now)
local budget = own or math.floor(tokens)
local limit = math.max(0, math.min(free, budget))
if state and state ~= 'open' then
  limit = 0
end

local exp = now + tonumber(ttl)
local res, n, held_until = {exp}, 0, {}
for i = 3, #ARGV do
  local v = ARGV[i]
  local until_ms = redis.call('ZSCORE', active, v)
  if until_ms then
    res[#res + 1] = 0
    held_until[#held_until + 1] = tonumber(until_ms)
  elseif n < limit then
    redis.call('ZADD', active, exp, v)
    n = n + 1
    res[#res + 1] = 1
  else
    res[#res + 1] = 2
  end
end
if own then
  tokens = math.min(tokens + own - n, batch + 1) -- unused tokens go back
else
  tokens = tokens - n
end
redis.call('HSET', meta, 'tokens', string.format('%.17g', tokens), 'refilled_ms', refilled)
redis.call('HINCRBY', meta, 'admitted_total', n)
for i = 1, #held_until do
  res[#res + 1] = held_until[i]
end
return res
