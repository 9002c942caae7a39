-- stock.lua: the units available (hold.Store.Stock).
-- Returns stock minus the units under live holds.
return tonumber(redis.call('GET', stock_key) or '0') - count('units')
