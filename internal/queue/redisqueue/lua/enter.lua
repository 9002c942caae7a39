-- enter.lua: put a visitor in the queue, or return its entry (queue.Store.Enter).
-- KEYS[1] meta hash, KEYS[2] wait zset (seq), KEYS[3] active zset (expiry ms),
-- KEYS[4] pre-queue zset (draw.lua)
-- ARGV    visitor, now (unix ms), draw key, draw commitment (both "" when
--         the caller does not know the room's seed)
-- Returns {kind, seq, position, expires_ms, created}; kind 0 = room not
-- found, 1 = room closed, 2 = waiting, 3 = active, 5 = the room's draw
-- needs the key (call again with the seed's).
local meta, wait, active, pre = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local visitor, now, key, commitment = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]

local state = redis.call('HGET', meta, 'state')
if not state then
  return {0}
end
local phase, drawn_with, base, entrants, moved = draw_phase(meta, pre, now)
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
local seq = tonumber(redis.call('ZSCORE', wait, visitor))
if seq then
  return {2, seq, redis.call('ZRANK', wait, visitor) + 1 +
    behind_pre(pre, seq, phase, base, entrants), 0, 0}
end
if phase then
  local e = pre_entry(wait, pre, member, phase, base, entrants, moved)
  if e then
    e[5] = 0
    return e
  end
end
if state == 'closed' or state == 'sold_out' then
  return {1}
end
if phase == 'pre' then
  redis.call('ZADD', pre, 0, member)
  return {2, 0, 0, 0, 1}
end

seq = redis.call('HINCRBY', meta, 'seq', 1)

-- Passthrough: nobody waits, the room is open, a slot is free and the token
-- bucket (the same one admit.lua uses) holds a token.
if state == 'open' and not phase and redis.call('ZCARD', wait) == 0 then
  local max_active, active_ttl, batch, admit_rate, tokens, refilled =
    unpack(redis.call('HMGET', meta, 'max_active', 'active_ttl', 'batch',
      'admit_rate', 'tokens', 'refilled_ms'))
  redis.call('ZREMRANGEBYSCORE', active, '-inf', now)
  admit_rate, batch = current_rate(meta, admit_rate, batch)
  tokens, refilled = refill(tokens, refilled, tonumber(admit_rate), tonumber(batch), now)
  local admit = redis.call('ZCARD', active) < tonumber(max_active) and tokens >= 1
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

redis.call('ZADD', wait, seq, visitor)
return {2, seq, redis.call('ZCARD', wait) + behind_pre(pre, seq, phase, base, entrants), 0, 1}
