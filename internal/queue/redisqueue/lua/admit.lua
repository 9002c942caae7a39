-- admit.lua: one admission step (queue.Store.Admit).
-- KEYS[1] meta hash, KEYS[2] wait zset (seq), KEYS[3] active zset (expiry ms),
-- KEYS[4] pre-queue zset (draw.lua)
-- ARGV    now (unix ms)
-- Returns {} when the room does not exist, else {expired, admitted...} with
-- the admitted visitors in arrival order.
local meta, wait, active, pre = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now = tonumber(ARGV[1])

local state, max_active, claim_window, batch, admit_rate, tokens, refilled =
  unpack(redis.call('HMGET', meta, 'state', 'max_active', 'claim_window',
    'batch', 'admit_rate', 'tokens', 'refilled_ms'))
if not state then
  return {}
end
local expired = redis.call('ZREMRANGEBYSCORE', active, '-inf', now)
local phase, _, base, _, moved = draw_phase(meta, pre, now)

admit_rate, batch = current_rate(meta, admit_rate, batch)
tokens, refilled = refill(tokens, refilled, tonumber(admit_rate), tonumber(batch), now)

local res = {expired}
local n = 0
if state == 'open' and phase ~= 'pre' then
  n = math.min(tonumber(max_active) - redis.call('ZCARD', active), math.floor(tokens),
    redis.call('ZCARD', wait) + redis.call('ZCARD', pre))
end
if n > 0 and phase == 'drawn' then
  -- The next n in line are among those waiting since before the draw, the
  -- drawn entrants moved so far, and the next n in the pre-queue: move
  -- those n (their seqs follow the moved ones') before popping.
  local next = redis.call('ZPOPMIN', pre, n)
  local args = {}
  for i = 1, #next, 2 do
    moved = moved + 1
    args[#args + 1] = base + moved
    args[#args + 1] = string.sub(next[i], 33)
    if #args == 2000 then
      redis.call('ZADD', wait, unpack(args))
      args = {}
    end
  end
  if #args > 0 then
    redis.call('ZADD', wait, unpack(args))
  end
  redis.call('HSET', meta, 'draw_moved', moved)
end
if n > 0 then
  tokens = tokens - n
  redis.call('HINCRBY', meta, 'admitted_total', n)
  local exp = now + math.floor(tonumber(claim_window) / 1e6)
  local popped = redis.call('ZPOPMIN', wait, n)
  -- ZADD in chunks: unpack is limited by Lua's C stack (8000 slots).
  local args = {}
  for i = 1, #popped, 2 do
    res[#res + 1] = popped[i]
    args[#args + 1] = exp
    args[#args + 1] = popped[i]
    if #args == 2000 then
      redis.call('ZADD', active, unpack(args))
      args = {}
    end
  end
  if #args > 0 then
    redis.call('ZADD', active, unpack(args))
  end
end
redis.call('HSET', meta, 'tokens', string.format('%.17g', tokens), 'refilled_ms', refilled)
return res
