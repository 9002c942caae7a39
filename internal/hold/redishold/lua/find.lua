-- find.lua: the live hold that has a seat (hold.Store.Find).
-- ARGV[3] seat
-- Returns {id, record}, or nil when no live hold has the seat. A seat key
-- naming a hold that is no longer live (ended above) does not count.
local id = redis.call('GET', base .. 'seat:' .. ARGV[3])
if not id or not redis.call('ZSCORE', holds_key, id) then
  return nil
end
local rec = redis.call('HGET', hold_key, id)
if not rec then
  return nil
end
return {id, rec}
