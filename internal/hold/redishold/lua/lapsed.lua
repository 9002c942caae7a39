-- lapsed.lua: hand out the scope's lapsed holds (hold.Store.Lapsed), after
-- common.lua reclaimed those expired at now. ARGV[3] the most to return.
-- Returns "id holder quantity expiry_ms seat..." records, oldest first; each
-- is removed, so it goes to one caller.
local n = tonumber(ARGV[3])
local out = redis.call('LRANGE', lapsed_key, 0, n - 1)
if #out > 0 then
  redis.call('LTRIM', lapsed_key, #out, -1)
end
return out
