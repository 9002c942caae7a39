-- bucket.lua: prepended to enter.lua and admit.lua, which share the room's
-- token bucket (queue.Store.Admit documents it), after redisscript's
-- refill.lua.

-- current_rate returns the rate and batch the bucket follows
-- (queue.Settings.CurrentRate): the configured ones for a static room; for
-- an adaptive one the controller's admit_rate_current (admit_rate before
-- its first step) within min_admit_rate and max_admit_rate, and the batch
-- of that rate (queue.Settings.Batch).
local function current_rate(meta, rate, batch)
  local admission, current, lo, hi, interval = unpack(redis.call('HMGET', meta,
    'admission', 'admit_rate_current', 'min_admit_rate', 'max_admit_rate', 'interval'))
  if admission ~= 'adaptive' then
    return rate, batch
  end
  local r = tonumber(current) or 0
  if r <= 0 then
    r = tonumber(rate)
  end
  r = math.min(math.max(r, tonumber(lo)), tonumber(hi))
  return r, math.max(1, math.ceil(r * tonumber(interval) / 1e9 - 1e-9))
end
