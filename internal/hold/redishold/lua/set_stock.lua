-- set_stock.lua: set the units available (hold.Store.SetStock).
-- KEYS[1] stock, KEYS[4] held hash (see common.lua)
-- ARGV[1] total
-- The stock key counts the units under unended holds too, so it becomes
-- total plus those: they come back on top of total when their holds end.
-- It takes no now and reclaims nothing.
local units = tonumber(redis.call('HGET', KEYS[4], 'units') or '0')
redis.call('SET', KEYS[1], tonumber(ARGV[1]) + units)
return 1
