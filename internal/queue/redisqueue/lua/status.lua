-- status.lua: a visitor's exact entry, renewing an active one (queue.Store.Status).
-- KEYS[1] meta hash, KEYS[2] wait zset (seq), KEYS[3] active zset (expiry ms),
-- KEYS[4] pre-queue zset (draw.lua), KEYS[5] seen, KEYS[6] parked and
-- KEYS[7] back zsets (presence.lua), KEYS[8] priority lane zset
-- ARGV    visitor, now (unix ms), draw key, draw commitment (as enter.lua)
-- Returns {kind, seq, position, expires_ms}; kind 0 = room not found,
-- 2 = waiting, 3 = active, 4 = gone, 5 = the room's draw needs the key.
local meta, wait, active, pre, seen, parked, back, lane =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local visitor, now, key, commitment = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]

local ttl, seed_commitment, drawn, opens =
  unpack(redis.call('HMGET', meta, 'active_ttl', 'draw_commitment', 'drawn', 'opens_at'))
if not ttl then
  return {0}
end
local phase, drawn_with, base, entrants, moved = draw_phase(meta, pre, now, seed_commitment, drawn, opens)
if phase and commitment ~= drawn_with then
  return {5}
end

local exp = tonumber(redis.call('ZSCORE', active, visitor))
if exp then
  if exp > now then
    local renewed = now + math.floor(tonumber(ttl) / 1e6)
    if renewed > exp then
      redis.call('ZADD', active, renewed, visitor)
      exp = renewed
    end
    return {3, 0, 0, exp}
  end
  redis.call('ZREM', active, visitor)
end
local in_lane = redis.call('ZRANK', lane, visitor)
if in_lane then
  return {2, 0, in_lane + 1, 0}
end
local e = waiting_entry(wait, seen, parked, back, visitor, now,
  function(seq) return behind_pre(pre, seq, phase, base, entrants) end)
if e then
  return e
end
if phase then
  local e = pre_entry(wait, pre, key .. visitor, phase, base, entrants, moved, redis.call('ZCARD', back))
  if e then
    return e
  end
end
return {4}
