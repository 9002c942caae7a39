-- enter.lua: put a visitor in the queue, or return its entry (queue.Store.Enter).
-- KEYS[1] meta hash, KEYS[2] wait zset (seq), KEYS[3] active zset (expiry ms),
-- KEYS[4] pre-queue zset (draw.lua), KEYS[5] seen, KEYS[6] parked and
-- KEYS[7] back zsets (presence.lua), KEYS[8] priority lane zset (lane
-- seq), KEYS[9] the lane code's use counter (queue.Store.EnterLane only)
-- ARGV    visitor, now (unix ms), draw key, draw commitment (both "" when
--         the caller does not know the room's seed), u (uniform in [0, 1):
--         a random room's draw, queue.DrawSlot); for a lane entry also the
--         code's uses and expiry (unix ms)
-- Returns {kind, seq, position, expires_ms, created}; kind 0 = room not
-- found, 1 = room closed, 2 = waiting, 3 = active, 5 = the room's draw
-- needs the key (call again with the seed's), 6 = the line is full
-- (max_waiting), 7 = the lane code is used up, 8 = the room has no lane.
-- A lane place is waiting with seq 0 and its position in the lane.
local meta, wait, active, pre, seen, parked, back, lane, code =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local visitor, now, key, commitment = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local u, uses, code_exp = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])

local state, seed_commitment, drawn, opens, inventory, max_waiting, share, queueing, draw_window =
  unpack(redis.call('HMGET', meta, 'state', 'draw_commitment', 'drawn', 'opens_at',
    'inventory', 'max_waiting', 'priority_share', 'queueing', 'draw_window'))
if not state then
  return {0}
end
local phase, drawn_with, base, entrants, moved = draw_phase(meta, pre, now, seed_commitment, drawn, opens)
if phase and commitment ~= drawn_with then
  return {5}
end
local member = key .. visitor

-- An existing entry wins: a visitor never moves back. An active visitor whose
-- expiry has passed counts as gone.
local exp = tonumber(redis.call('ZSCORE', active, visitor))
if exp then
  if exp > now then
    return {3, 0, 0, exp, 0}
  end
  redis.call('ZREM', active, visitor)
end
local in_lane = redis.call('ZRANK', lane, visitor)
if in_lane then
  return {2, 0, in_lane + 1, 0, 0}
end
local e = waiting_entry(wait, seen, parked, back, visitor, now,
  function(seq) return behind_pre(pre, seq, phase, base, entrants) end)
if e then
  e[5] = 0
  return e
end
if phase then
  local e = pre_entry(wait, pre, member, phase, base, entrants, moved, redis.call('ZCARD', back))
  if e then
    e[5] = 0
    return e
  end
end
-- An inventory of 0 makes the room sold out (queue.Stats.EffectiveState).
-- A reject room (queue.QueueReject) takes no newcomers.
if state == 'closed' or state == 'sold_out' or inventory == '0' or queueing == 'reject' then
  return {1}
end
-- A full line is not empty, so this also rules out passthrough.
max_waiting = tonumber(max_waiting) or 0
local line = redis.call('ZCARD', wait) + redis.call('ZCARD', pre) + redis.call('ZCARD', back) +
  redis.call('ZCARD', lane)
if uses and (tonumber(share) or 0) == 0 then
  return {8}
end
if max_waiting > 0 and line >= max_waiting then
  return {6}
end
if uses then
  -- A lane code's uses, counted until it expires.
  local n = redis.call('INCR', code)
  if n == 1 then
    redis.call('PEXPIRE', code, math.max(1, code_exp - now))
  end
  if n > uses then
    redis.call('DECR', code)
    return {7}
  end
end
if phase == 'pre' and not uses then
  redis.call('ZADD', pre, 0, member)
  return {2, 0, 0, 0, 1}
end

local seq = 0
if not uses then
  seq = redis.call('HINCRBY', meta, 'seq', 1)
end

-- Passthrough: nobody waits, the room is open, a slot is free under the
-- cap and the token bucket (the same one admit.lua uses) holds a token.
-- Limits older than their inputs (limits.lua) make no passthrough: the
-- visitor waits for the next step, which stores them anew.
local lim = state == 'open' and not phase and line == 0 and limits(meta)
if lim then
  local active_ttl, tokens, refilled = unpack(redis.call('HMGET', meta, 'active_ttl', 'tokens', 'refilled_ms'))
  redis.call('ZREMRANGEBYSCORE', active, '-inf', now)
  tokens, refilled = refill(tokens, refilled, lim.rate, lim.batch, now)
  local admit = redis.call('ZCARD', active) < lim.cap and tokens >= 1
  if admit then
    tokens = tokens - 1
  end
  redis.call('HSET', meta, 'tokens', string.format('%.17g', tokens), 'refilled_ms', refilled)
  if admit then
    redis.call('HINCRBY', meta, 'admitted_total', 1)
    exp = now + math.floor(tonumber(active_ttl) / 1e6)
    redis.call('ZADD', active, exp, visitor)
    return {3, seq, 0, exp, 1}
  end
end

if uses then
  redis.call('ZADD', lane, redis.call('HINCRBY', meta, 'lane_seq', 1), visitor)
  return {2, 0, redis.call('ZCARD', lane), 0, 1}
end
-- A random room (queue.QueueRandom) draws the newcomer into its window:
-- it takes the place of the window's entrant queue.DrawSlot picks among
-- those behind the near zone, who moves to the end. Stale limits (no near
-- zone known) draw nothing: this newcomer stays at the end.
if queueing == 'random' then
  local w = math.floor(tonumber(draw_window) / 1e6)
  local i = math.floor(now / w)
  local wi, ws = unpack(redis.call('HMGET', meta, 'win_i', 'win_seq'))
  if tonumber(wi) ~= i then
    ws = seq
    redis.call('HSET', meta, 'win_i', i, 'win_seq', seq)
  end
  local lim = limits(meta)
  local card = redis.call('ZCARD', wait)
  local n = lim and math.min(redis.call('ZCOUNT', wait, ws, '+inf'), card - lim.near) or 0
  local k = math.min(n, math.floor(u * (n + 1)))
  if k < n then
    local taken = redis.call('ZRANGE', wait, card - n + k, card - n + k, 'WITHSCORES')
    redis.call('ZADD', wait, seq, taken[1], taken[2], visitor)
    return {2, tonumber(taken[2]), line + 1 - (n - k), 0, 1}
  end
end
redis.call('ZADD', wait, seq, visitor)
return {2, seq, line + 1, 0, 1}
