-- hold_seats.lua: hold every seat or none (hold.Store.HoldSeats).
-- KEYS[6..] the seat keys, in request order (KEYS[5] is the guard)
-- ARGV[3] id, ARGV[4] holder, ARGV[5] limit, ARGV[6] expiry ms, ARGV[7] px
-- (expiry - now + margin), ARGV[8..] the seats, in request order
-- Returns {0} held, {1, seat...} taken (each once, in order of first
-- appearance: held by a live hold, or asked for twice), {2} over the limit.
local id, holder = ARGV[3], ARGV[4]
local limit, px = tonumber(ARGV[5]), tonumber(ARGV[7])
local n = #KEYS - 5

local times = {}
for i = 8, #ARGV do
  times[ARGV[i]] = (times[ARGV[i]] or 0) + 1
end
local taken = {1}
for i = 1, n do
  local seat = ARGV[7 + i]
  if times[seat] > 0 then -- first appearance
    local owner = redis.call('GET', KEYS[5 + i])
    if times[seat] > 1 or (owner and redis.call('ZSCORE', holds_key, owner)) then
      taken[#taken + 1] = seat
    end
    times[seat] = 0
  end
end
if #taken > 1 then
  return taken
end
if count('s:' .. holder) + n > limit then
  return {2}
end

-- A seat key naming a hold that has ended is free: SET overwrites it.
for i = 6, #KEYS do
  redis.call('SET', KEYS[i], id, 'PX', px)
end
if n > 0 then
  redis.call('HINCRBY', held_key, 's:' .. holder, n)
end
redis.call('HSET', hold_key, id, holder .. ' 0 ' .. ARGV[6] .. ' ' .. table.concat(ARGV, ' ', 8))
redis.call('ZADD', holds_key, ARGV[6], id)
keep(px)
return {0}
