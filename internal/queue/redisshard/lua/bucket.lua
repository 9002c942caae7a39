-- bucket.lua: prepended to the home scripts (reserve.lua, commit.lua,
-- release.lua), which share the room's token bucket in the home meta
-- hash, after redisscript's refill.lua (a new room's bucket starts with
-- batch tokens).

-- open_bucket reads the room's cap and token bucket from the home meta
-- hash (and the fields named in ..., after them), drops the active set's
-- expired slots and refills the bucket at now. It returns nil when the
-- room does not exist, else the cap, batch, tokens, refilled, whether the
-- limits are stale, and the named fields (false for one the hash does not
-- hold). The cap, rate and batch are the queue.Limits a room of the
-- queue's has stored (lim_*: QueueStore.RefreshLimits; stale when older
-- than their inputs, rules_v), else this package's settings.
local function open_bucket(meta, active, now, ...)
  local f = redis.call('HMGET', meta, 'max_active', 'admit_rate', 'batch', 'tokens', 'refilled_ms',
    'lim_v', 'rules_v', 'lim_cap', 'lim_rate', 'lim_batch', ...)
  if not f[1] then
    return nil
  end
  redis.call('ZREMRANGEBYSCORE', active, '-inf', now)
  local cap, rate, batch, stale = tonumber(f[1]), tonumber(f[2]), tonumber(f[3]), false
  if f[6] then
    cap, rate, batch, stale = tonumber(f[8]), tonumber(f[9]), tonumber(f[10]), f[6] ~= (f[7] or '0')
  end
  local tokens, refilled = refill(f[4], f[5], rate, batch, now)
  return cap, batch, tokens, refilled, stale, unpack(f, 11, 10 + select('#', ...))
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
