-- held_seats.lua: the seats under live holds (hold.Store.HeldSeats).
-- Returns the seats, in no order.
local seats = {}
for _, rec in ipairs(redis.call('HVALS', hold_key)) do
  local f = fields(rec)
  for i = 4, #f do
    seats[#seats + 1] = f[i]
  end
end
return seats
