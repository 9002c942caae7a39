-- inventory.lua: prepended to enter.lua and admit.lua: the cap the room's
-- inventory puts on its active set (queue.InventoryCap).
-- The meta hash's 'inventory' is the units the sale has left
-- (set_inventory.lua; absent: unknown, no cap) and 'visitors_per_unit' the
-- setting (set_inventory.lua writes its default into rooms written before
-- it existed). Returns max_active while the inventory is unknown or the
-- cap is off, 0 when nothing is left, else
-- min(max_active, ceil(visitors_per_unit × inventory)).
local function inventory_cap(meta, max_active)
  local inventory, per_unit = unpack(redis.call('HMGET', meta, 'inventory', 'visitors_per_unit'))
  inventory, per_unit = tonumber(inventory), tonumber(per_unit) or 0
  if not inventory then
    return max_active
  elseif inventory <= 0 then
    return 0
  elseif per_unit <= 0 then
    return max_active
  end
  return math.min(max_active, math.ceil(per_unit * inventory))
end
