-- common.lua: prepended to every script but set_stock.lua. The keys of one
-- scope, all under its hash tag:
--   KEYS[1] stock  string: units available plus units under unended holds
--   KEYS[2] holds  sorted set: hold id → expiry (unix ms, the caller's clock)
--   KEYS[3] hold   hash: hold id → record "holder quantity expiry_ms seat..."
--   KEYS[4] held   hash: "s:"..holder → seats held, "u:"..holder → units
--                  held, "units" → units held by all
--   KEYS[5] guard  never written: declared so that Redis Cluster runs no
--                  script while the scope's slot migrates (Store.keys)
-- ARGV[1] is the scope's key base "<prefix>{<scope>}:" (seat keys are
-- base.."seat:"..seat), ARGV[2] the caller's now in unix ms. Ids and seats
-- never contain a space (hold.Store's rule), so a record splits on spaces.
local stock_key, holds_key, hold_key, held_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local base, now = ARGV[1], tonumber(ARGV[2])

-- fields splits a record: holder, quantity, expiry, seats...
local function fields(rec)
  local f = {}
  for w in string.gmatch(rec, '[^ ]+') do
    f[#f + 1] = w
  end
  return f
end

local function decr(field, n)
  if redis.call('HINCRBY', held_key, field, -n) <= 0 then
    redis.call('HDEL', held_key, field)
  end
end

-- forget ends hold id with record fields f: its seat keys (those still
-- naming it) go, its counts drop, its units come back (available is stock
-- minus held units).
local function forget(id, f)
  local holder, qty = f[1], tonumber(f[2])
  for i = 4, #f do
    local k = base .. 'seat:' .. f[i]
    if redis.call('GET', k) == id then
      redis.call('DEL', k)
    end
  end
  if #f > 3 then
    decr('s:' .. holder, #f - 3)
  end
  if qty > 0 then
    decr('u:' .. holder, qty)
    decr('units', qty)
  end
  redis.call('HDEL', hold_key, id)
  redis.call('ZREM', holds_key, id)
end

-- Reclaim every hold whose expiry is at or before now. Afterwards every
-- member of the holds set is live at now. Each hold is reclaimed once, so
-- the cost is amortised O(1) per hold.
-- Each reclaimed hold goes, as "id record", to the end of the scope's
-- lapsed list (base.."lapsed", at most 10,000, the oldest dropped; Redis
-- drops the list an hour after its last push), which lapsed.lua hands out.
local lapsed_key = base .. 'lapsed'
local lapsed = 0
for _, id in ipairs(redis.call('ZRANGEBYSCORE', holds_key, '-inf', now)) do
  local rec = redis.call('HGET', hold_key, id)
  if rec then
    forget(id, fields(rec))
    redis.call('RPUSH', lapsed_key, id .. ' ' .. rec)
    lapsed = lapsed + 1
  else
    redis.call('ZREM', holds_key, id)
  end
end
if lapsed > 0 then
  redis.call('LTRIM', lapsed_key, -10000, -1)
  redis.call('PEXPIRE', lapsed_key, 3600000)
end

-- keep makes the scope's hold keys live at least px ms (Redis's clock)
-- more; they only shrink otherwise.
local function keep(px)
  for _, k in ipairs({holds_key, hold_key, held_key}) do
    if redis.call('PTTL', k) < px then
      redis.call('PEXPIRE', k, px)
    end
  end
end

local function count(field)
  return tonumber(redis.call('HGET', held_key, field) or '0')
end
