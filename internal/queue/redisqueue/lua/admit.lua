-- admit.lua: one admission step (queue.Store.Admit).
-- KEYS[1] meta hash, KEYS[2] wait zset (seq), KEYS[3] active zset (expiry ms),
-- KEYS[4] pre-queue zset (draw.lua), KEYS[5] seen zset: when each watched
-- visitor was last seen (ms; enter.lua and status.lua update it), negated
-- while it is unpolled (marked while the room admitted nobody, or drawn,
-- or behind another unpolled visitor, and not seen by a poll since), KEYS[6] parked and KEYS[7] back zsets
-- (presence.lua), KEYS[8] the priority lane zset (lane seq)
-- ARGV    now (unix ms)
-- Returns {} when the room does not exist, {-1} when its limits are older
-- than their inputs (limits.lua: nothing was done), else {expired,
-- skipped, abandoned, admitted...} with the admitted visitors in the
-- order taken.
local meta, wait, active, pre, seen, parked, back, lane =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local now = tonumber(ARGV[1])

local state, claim_window, tokens, refilled, commitment, drawn, opens =
  unpack(redis.call('HMGET', meta, 'state', 'claim_window', 'tokens', 'refilled_ms',
    'draw_commitment', 'drawn', 'opens_at'))
if not state then
  return {}
end
local lim = limits(meta)
if not lim then
  return {-1}
end
local expired = redis.call('ZREMRANGEBYSCORE', active, '-inf', now)
local phase, _, base, entrants, moved = draw_phase(meta, pre, now, commitment, drawn, opens)
local presence, batch, near = lim.presence, lim.batch, lim.near
tokens, refilled = refill(tokens, refilled, lim.rate, batch, now)

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

-- Parked visitors absent past the grace lose their place: up to 1,000 a
-- step, the longest parked (lowest seq) first.
local abandoned = {}
if redis.call('EXISTS', parked) == 1 then
  local cutoff = now - lim.grace
  local oldest = redis.call('ZRANGE', parked, 0, 999)
  for i = 1, #oldest do
    local last = tonumber(redis.call('ZSCORE', seen, oldest[i]))
    if not last or math.abs(last) <= cutoff then
      abandoned[#abandoned + 1] = oldest[i]
    end
  end
  zrem_chunks(parked, abandoned)
  zrem_chunks(seen, abandoned)
end

local n = 0
local admits = state == 'open' and phase ~= 'pre'
local in_lane = redis.call('ZCARD', lane)
if admits then
  n = math.min(lim.cap - redis.call('ZCARD', active), math.floor(tokens),
    redis.call('ZCARD', wait) + redis.call('ZCARD', pre) + redis.call('ZCARD', back) + in_lane)
end
-- The priority lane's part of the step (queue.LaneSplit): the whole part
-- of the carried credit plus share × n; the main line takes n minus it,
-- and the lane what the main line leaves (below).
local lane_n = 0
if n > 0 then
  local share, credit = unpack(redis.call('HMGET', meta, 'priority_share', 'lane_credit'))
  local c = (tonumber(credit) or 0) + (tonumber(share) or 0) * n
  lane_n = math.min(n, math.floor(c + 1e-9))
  redis.call('HSET', meta, 'lane_credit', string.format('%.17g', math.max(0, c - lane_n)))
  lane_n = math.min(lane_n, in_lane)
  n = n - lane_n
end
if phase == 'drawn' and (n > 0 or presence > 0) then
  -- The next n in line are among those waiting since before the draw, the
  -- drawn entrants moved so far, and the next n in the pre-queue. Move
  -- enough that the drawn entrants out of the pre-queue cover them (with
  -- presence, the watched zone too, which may have absent visitors to
  -- park, and is watched while the room admits nobody), counting those
  -- moved before and still waiting.
  local want = n
  if presence > 0 then
    want = n + near
  end
  local m = want - redis.call('ZCOUNT', wait, '(' .. base, base + moved)
  local next = m > 0 and redis.call('ZPOPMIN', pre, m) or {}
  local args = {}
  for i = 1, #next, 2 do
    moved = moved + 1
    args[#args + 1] = base + moved
    args[#args + 1] = string.sub(next[i], 33)
  end
  zadd_chunks(wait, args)
  redis.call('HSET', meta, 'draw_moved', moved)
end

if presence > 0 then
  -- Mark who came near the front since the last step as seen now: presence
  -- counts from when a visitor's polls started to reach the store. Those
  -- marked while the room admits nobody, and drawn entrants, are unpolled
  -- (-now): admitted only once a poll has seen them, so that a visitor
  -- who left before the opening is not admitted at it.
  -- unpolled_seq is the last seq so marked.
  local zone, dbase, dn, last = unpack(redis.call('HMGET', meta, 'zone_seq', 'draw_base', 'draw_entrants', 'unpolled_seq'))
  zone, dbase, dn, last = tonumber(zone) or 0, tonumber(dbase) or math.huge, tonumber(dn) or 0, tonumber(last) or 0
  local edge = redis.call('ZRANGE', wait, near - 1, near - 1, 'WITHSCORES')
  local fresh = redis.call('ZRANGEBYSCORE', wait, '(' .. zone, edge[2] or '+inf', 'WITHSCORES')
  local args = {}
  -- While an unpolled visitor is in line, those marked behind it are
  -- unpolled too: a step admits only visitors a poll has shown there, so
  -- the present never wait on a ghost ahead of them (parked visitors'
  -- scores are made positive when they are parked).
  local pending = #fresh > 0 and redis.call('ZCOUNT', seen, '-inf', '(0') > 0
  for i = 1, #fresh, 2 do
    local seq = tonumber(fresh[i + 1])
    if not admits or pending or (seq > dbase and seq <= dbase + dn) then
      pending = true
      args[#args + 1] = -now
      last = seq
    else
      args[#args + 1] = now
    end
    args[#args + 1] = fresh[i]
    zone = math.max(zone, seq)
  end
  if #args > 0 then
    for i = 1, #args, 2000 do
      redis.call('ZADD', seen, 'NX', unpack(args, i, math.min(i + 1999, #args)))
    end
    redis.call('HSET', meta, 'zone_seq', zone, 'unpolled_seq', last)
  end
end

local admit, skipped = {}, 0
if n > 0 then
  -- The parked visitors who came back go first, in their order.
  local returned = redis.call('ZRANGE', back, 0, n - 1)
  for i = 1, #returned do
    admit[#admit + 1] = returned[i]
  end
  zrem_chunks(back, returned)
end
if #admit < n and presence == 0 then
  local popped = redis.call('ZPOPMIN', wait, n - #admit)
  for i = 1, #popped, 2 do
    admit[#admit + 1] = popped[i]
  end
elseif #admit < n then
  -- Take present visitors from the head; park the absent: out of the line
  -- (so the head and the positions behind them are what admission does),
  -- back in it, first, at their next poll. Pass over the unpolled not yet
  -- absent, keeping their place, and past one of them stop at the first
  -- visitor marked after the last unpolled one (a visitor beyond the
  -- watched zone). Drawn entrants still in the pre-queue come before
  -- anyone who entered after the draw: stop there.
  local limit = math.huge
  if phase == 'drawn' and redis.call('EXISTS', pre) == 1 then
    limit = base + entrants
  end
  local taken, park = {}, {}
  local from, done, passed = 0, #admit == n, false
  local unpolled = tonumber(redis.call('HGET', meta, 'unpolled_seq')) or 0
  while not done do
    local page = redis.call('ZRANGE', wait, from, from + 199, 'WITHSCORES')
    if #page == 0 then
      break
    end
    for i = 1, #page, 2 do
      local v, seq = page[i], tonumber(page[i + 1])
      local last = tonumber(redis.call('ZSCORE', seen, v))
      if seq > limit or (passed and seq > unpolled) then
        done = true
      elseif last and now - math.abs(last) >= presence then
        park[#park + 1] = seq
        park[#park + 1] = v
        if last < 0 then -- parked, it is no longer unpolled in line
          redis.call('ZADD', seen, 'XX', -last, v)
        end
      elseif last and last < 0 then
        passed = true
      else
        admit[#admit + 1] = v
        taken[#taken + 1] = v
        done = #admit == n
      end
      if done then
        break
      end
    end
    from = from + 200
  end
  zrem_chunks(wait, taken)
  local parkedIDs = {}
  for i = 2, #park, 2 do
    parkedIDs[#parkedIDs + 1] = park[i]
  end
  zrem_chunks(wait, parkedIDs)
  zadd_chunks(parked, park)
  skipped = #parkedIDs
end
zrem_chunks(seen, admit)
lane_n = math.min(in_lane, lane_n + n - #admit)
if lane_n > 0 then
  local popped = redis.call('ZPOPMIN', lane, lane_n)
  for i = 1, #popped, 2 do
    admit[#admit + 1] = popped[i]
  end
end

local res = {expired, skipped, #abandoned}
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
