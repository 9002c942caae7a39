-- bucket.lua: prepended to the home scripts (reserve.lua, commit.lua,
-- release.lua), which share the room's token bucket in the home meta
-- hash, after redisscript's refill.lua (a new room's bucket starts with
-- batch tokens).

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
