-- release.lua: one admission step of a counters-only room (Store.Admit),
-- on the home shard: release the next turns of the shards' counters. No
-- visitor is named: a turn is a sequence number of a shard, and the
-- visitor whose ticket carries it claims a slot with it (claim.lua).
-- KEYS[1] home meta hash, KEYS[2] active zset (claimed visitor → expiry
-- ms), KEYS[3] turns zset (batch → shard × 2^40 + first seq), KEYS[4]
-- turn_ends zset (batch → end of its claim window, ms)
-- ARGV    now (ms), then each shard's counter (the last seq it issued)
-- Returns {-1} when the room does not exist, else {released, shard,
-- first, last, …}: one triple per shard that released turns.
--
-- A batch is "shard:first:last"; the meta field c:<batch> counts its
-- claims. Its unclaimed turns hold slots (count against max_active) until
-- its claim window ends: a ghost's turn costs a token and, for the claim
-- window, a slot, as an admitted visitor who never comes does elsewhere.
local meta, active, turns, ends = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now = tonumber(ARGV[1])

local max_active, _, tokens, refilled, _, window = open_bucket(meta, active, now, 'claim_window_ms')
if not max_active then
  return {-1}
end
local dead = redis.call('ZRANGEBYSCORE', ends, '-inf', now)
for i = 1, #dead do
  redis.call('HDEL', meta, 'c:' .. dead[i])
  redis.call('ZREM', turns, dead[i])
end
if #dead > 0 then
  redis.call('ZREMRANGEBYSCORE', ends, '-inf', now)
end
local pending = 0
local live = redis.call('ZRANGE', turns, 0, -1)
for i = 1, #live do
  local _, first, last = string.match(live[i], '^(%d+):(%d+):(%d+)$')
  pending = pending + tonumber(last) - tonumber(first) + 1
    - (tonumber(redis.call('HGET', meta, 'c:' .. live[i])) or 0)
end

local n = math.max(0, math.min(max_active - redis.call('ZCARD', active) - pending, math.floor(tokens)))

-- Round-robin over the shards from the step's turn, one at a time, each
-- up to what its counter has issued.
local k = #ARGV - 1
local heads, avail, give = {}, {}, {}
for i = 1, k do
  heads[i] = tonumber(redis.call('HGET', meta, 'h:' .. (i - 1))) or 0
  avail[i] = math.max(0, tonumber(ARGV[i + 1]) - heads[i])
  give[i] = 0
end
local start = redis.call('HINCRBY', meta, 'turn', 1)
local left, open = n, true
while left > 0 and open do
  open = false
  for j = 0, k - 1 do
    local i = (start + j) % k + 1
    if left > 0 and give[i] < avail[i] then
      give[i] = give[i] + 1
      left = left - 1
      open = true
    end
  end
end

local res, released = {0}, 0
local until_ms = now + tonumber(window)
for i = 1, k do
  if give[i] > 0 then
    local first, last = heads[i] + 1, heads[i] + give[i]
    local b = (i - 1) .. ':' .. first .. ':' .. last
    redis.call('ZADD', turns, (i - 1) * 1099511627776 + first, b)
    redis.call('ZADD', ends, until_ms, b)
    redis.call('HSET', meta, 'h:' .. (i - 1), last)
    res[#res + 1] = i - 1
    res[#res + 1] = first
    res[#res + 1] = last
    released = released + give[i]
  end
end
res[1] = released
redis.call('HSET', meta, 'tokens', string.format('%.17g', tokens - released), 'refilled_ms', refilled)
redis.call('HINCRBY', meta, 'admitted_total', released)
return res
