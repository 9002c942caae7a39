-- admit.lua: one admission step (queue.Store.Admit).
-- KEYS[1] meta hash, KEYS[2] wait zset (seq), KEYS[3] active zset (expiry ms),
-- KEYS[4] pre-queue zset (draw.lua), KEYS[5] seen zset: when each waiting
-- visitor near the front was last seen (ms; enter.lua and status.lua
-- update it)
-- ARGV    now (unix ms), the default presence_timeout (ns), for rooms
--         written before the setting existed
-- Returns {} when the room does not exist, else {expired, skipped,
-- abandoned, admitted...} with the admitted visitors in arrival order.
local meta, wait, active, pre, seen = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local now = tonumber(ARGV[1])

local state, max_active, claim_window, batch, admit_rate, tokens, refilled, presence, ttl =
  unpack(redis.call('HMGET', meta, 'state', 'max_active', 'claim_window',
    'batch', 'admit_rate', 'tokens', 'refilled_ms', 'presence_timeout', 'active_ttl'))
if not state then
  return {}
end
local expired = redis.call('ZREMRANGEBYSCORE', active, '-inf', now)
local phase, _, base, entrants, moved = draw_phase(meta, pre, now)
presence = math.floor((tonumber(presence) or tonumber(ARGV[2])) / 1e6)
batch, admit_rate = tonumber(batch), tonumber(admit_rate)

tokens, refilled = refill(tokens, refilled, admit_rate, batch, now)

local n = 0
if state == 'open' and phase ~= 'pre' then
  n = math.min(inventory_cap(meta, tonumber(max_active)) - redis.call('ZCARD', active), math.floor(tokens),
    redis.call('ZCARD', wait) + redis.call('ZCARD', pre))
end
-- queue.Watched: the places watched for presence, whose polls reach the
-- store (PresenceMargin is 10 s).
local near = math.max(50, 2 * batch, math.ceil(5 * admit_rate))
if presence > 0 then
  near = math.max(near, math.ceil((presence / 1000 + 10) * admit_rate))
end

-- zadd_chunks ZADDs score/member pairs in chunks: unpack is limited by
-- Lua's C stack (8000 slots).
local function zadd_chunks(key, pairs)
  for i = 1, #pairs, 2000 do
    redis.call('ZADD', key, unpack(pairs, i, math.min(i + 1999, #pairs)))
  end
end
local function zrem_chunks(key, members)
  for i = 1, #members, 4000 do
    redis.call('ZREM', key, unpack(members, i, math.min(i + 3999, #members)))
  end
end

if n > 0 and phase == 'drawn' then
  -- The next n in line are among those waiting since before the draw, the
  -- drawn entrants moved so far, and the next n in the pre-queue: move
  -- those (their seqs follow the moved ones'; with presence, the near
  -- front too, which may have absent visitors to pass over) before taking.
  local m = n
  if presence > 0 then
    m = n + near
  end
  local next = redis.call('ZPOPMIN', pre, m)
  local args = {}
  for i = 1, #next, 2 do
    moved = moved + 1
    args[#args + 1] = base + moved
    args[#args + 1] = string.sub(next[i], 33)
  end
  zadd_chunks(wait, args)
  redis.call('HSET', meta, 'draw_moved', moved)
end

local admit, skipped, gone = {}, 0, {}
if n > 0 and presence == 0 then
  local popped = redis.call('ZPOPMIN', wait, n)
  for i = 1, #popped, 2 do
    admit[#admit + 1] = popped[i]
  end
elseif n > 0 then
  -- Mark who came near the front since the last step as seen now: presence
  -- counts from when a visitor's polls started to reach the store.
  local zone = tonumber(redis.call('HGET', meta, 'zone_seq')) or 0
  local edge = redis.call('ZRANGE', wait, near - 1, near - 1, 'WITHSCORES')
  local fresh = redis.call('ZRANGEBYSCORE', wait, '(' .. zone, edge[2] or '+inf', 'WITHSCORES')
  local args = {}
  for i = 1, #fresh, 2 do
    args[#args + 1] = now
    args[#args + 1] = fresh[i]
    zone = math.max(zone, tonumber(fresh[i + 1]))
  end
  if #args > 0 then
    for i = 1, #args, 2000 do
      redis.call('ZADD', seen, 'NX', unpack(args, i, math.min(i + 1999, #args)))
    end
    redis.call('HSET', meta, 'zone_seq', zone)
  end
  -- Take the first n present visitors; pass over the absent, drop those
  -- absent past the grace. Drawn entrants still in the pre-queue come
  -- before anyone who entered after the draw: stop there.
  local limit = math.huge
  if phase == 'drawn' and redis.call('EXISTS', pre) == 1 then
    limit = base + entrants
  end
  local grace = presence + math.floor(tonumber(ttl) / 1e6)
  local from, done = 0, false
  while not done do
    local page = redis.call('ZRANGE', wait, from, from + 199, 'WITHSCORES')
    if #page == 0 then
      break
    end
    for i = 1, #page, 2 do
      local v = page[i]
      local last = tonumber(redis.call('ZSCORE', seen, v))
      if tonumber(page[i + 1]) > limit then
        done = true
      elseif last and now - last >= grace then
        gone[#gone + 1] = v
      elseif last and now - last >= presence then
        skipped = skipped + 1
      else
        admit[#admit + 1] = v
        done = #admit == n
      end
      if done then
        break
      end
    end
    from = from + 200
  end
  zrem_chunks(wait, admit)
  zrem_chunks(wait, gone)
  zrem_chunks(seen, admit)
  zrem_chunks(seen, gone)
end

local res = {expired, skipped, #gone}
if #admit > 0 then
  tokens = tokens - #admit
  redis.call('HINCRBY', meta, 'admitted_total', #admit)
  local exp = now + math.floor(tonumber(claim_window) / 1e6)
  local args = {}
  for i = 1, #admit do
    res[#res + 1] = admit[i]
    args[#args + 1] = exp
    args[#args + 1] = admit[i]
  end
  zadd_chunks(active, args)
end
redis.call('HSET', meta, 'tokens', string.format('%.17g', tokens), 'refilled_ms', refilled)
return res
