-- bucket.lua: prepended to the home scripts (reserve.lua, commit.lua),
-- which share the room's token bucket in the home meta hash.
-- refill returns the tokens and the refill time at now: rate per second
-- since the last refill, up to batch + 1. A now earlier than the last
-- refill (a scheduler with a slow clock) adds nothing. A new room's bucket
-- starts with batch tokens.
local function refill(tokens, refilled, rate, batch, now)
  tokens, refilled = tonumber(tokens), tonumber(refilled)
  if not refilled then
    return batch, now
  end
  if now > refilled then
    tokens = tokens + rate * (now - refilled) / 1000
    refilled = now
  end
  return math.min(tokens, batch + 1), refilled
end

-- held drops the reservations whose lease has passed and returns the
-- visitors the live ones hold. A reservation is a member of the resv zset
-- (id → lease end, ms) and a field r:<id> = n of the meta hash.
local function held(meta, resv, now)
  local dead = redis.call('ZRANGEBYSCORE', resv, '-inf', now)
  for i = 1, #dead do
    redis.call('HDEL', meta, 'r:' .. dead[i])
  end
  if #dead > 0 then
    redis.call('ZREMRANGEBYSCORE', resv, '-inf', now)
  end
  local live = redis.call('ZRANGE', resv, 0, -1)
  local n = 0
  for i = 1, #live do
    n = n + (tonumber(redis.call('HGET', meta, 'r:' .. live[i])) or 0)
  end
  return n
end
