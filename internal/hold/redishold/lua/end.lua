-- end.lua: end a live hold (hold.Store.Release and hold.Store.Consume).
-- ARGV[3] id, ARGV[4] "release" (units come back) or "consume" (they are
-- sold: the stock loses them)
-- Returns 1 when the hold ended, 0 when it was not live.
local id = ARGV[3]
local rec = redis.call('HGET', hold_key, id)
if not rec then
  return 0
end
local f = fields(rec)
if ARGV[4] == 'consume' and tonumber(f[2]) > 0 then
  redis.call('DECRBY', stock_key, f[2])
end
forget(id, f)
return 1
