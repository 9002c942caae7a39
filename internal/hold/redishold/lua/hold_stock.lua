-- hold_stock.lua: take n units with one check-and-decrement (hold.Store.HoldStock).
-- ARGV[3] id, ARGV[4] holder, ARGV[5] n, ARGV[6] limit, ARGV[7] expiry ms,
-- ARGV[8] px (expiry - now + margin)
-- Returns {0} held, {2} over the limit, {3} sold out.
local id, holder = ARGV[3], ARGV[4]
local n, limit = tonumber(ARGV[5]), tonumber(ARGV[6])

local units = count('units')
if tonumber(redis.call('GET', stock_key) or '0') - units < n then
  return {3}
end
if count('u:' .. holder) + n > limit then
  return {2}
end
if n > 0 then
  redis.call('HINCRBY', held_key, 'u:' .. holder, n)
  redis.call('HINCRBY', held_key, 'units', n)
end
redis.call('HSET', hold_key, id, holder .. ' ' .. ARGV[5] .. ' ' .. ARGV[7])
redis.call('ZADD', holds_key, ARGV[7], id)
keep(tonumber(ARGV[8]))
return {0}
