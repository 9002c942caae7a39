-- reserve.lua: the first call of an admission step, on the home shard
-- (Store.Admit): take n tokens and n free slots for one step, held under
-- the step's id until commit.lua or the lease's end.
-- KEYS[1] home meta hash, KEYS[2] active zset (visitor → expiry ms),
-- KEYS[3] resv zset (step id → lease end ms)
-- ARGV    now (ms), step id, lease (ms)
-- Returns {-1} when the room does not exist, {-2} when its stored limits
-- are older than their inputs (open_bucket; nothing taken), else
-- {n, turn}: n visitors
-- may be admitted by this step; turn counts the steps (the round-robin
-- start of the estimate strategy). A room whose state is set and not open
-- (usher's paused, closed and sold_out) admits nobody; expiry still runs.
local meta, active, resv = KEYS[1], KEYS[2], KEYS[3]
local now, id, lease = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])

local max_active, _, tokens, refilled, stale, state = open_bucket(meta, active, now, 'state')
if not max_active then
  return {-1}
elseif stale then
  return {-2}
end
if state and state ~= 'open' then
  return {0, 0}
end
local free = max_active - redis.call('ZCARD', active) - held(meta, resv, now)
local n = math.max(0, math.min(free, math.floor(tokens)))
tokens = tokens - n
redis.call('HSET', meta, 'tokens', string.format('%.17g', tokens), 'refilled_ms', refilled)
if n == 0 then
  return {0, 0}
end
redis.call('HSET', meta, 'r:' .. id, n)
redis.call('ZADD', resv, now + lease, id)
return {n, redis.call('HINCRBY', meta, 'turn', 1)}
