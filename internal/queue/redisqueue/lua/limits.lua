-- limits.lua: prepended to enter.lua and admit.lua: the room's queue.Limits
-- as Go computed and stored them (set_limits.lua), read as data: the
-- admission rules' numbers are computed in Go only.
--
-- limits returns them (durations in ms), or nil when they are older than
-- their inputs: every write of a setting, the inventory or the controller's
-- state bumps rules_v (put_room.lua, set_inventory.lua, set_control.lua),
-- and set_limits.lua stores the limits with the rules_v they were computed
-- at, in lim_v.
local function limits(meta)
  local v, rules, cap, rate, batch, near, presence, grace = unpack(redis.call('HMGET', meta,
    'lim_v', 'rules_v', 'lim_cap', 'lim_rate', 'lim_batch', 'lim_near', 'lim_presence_ms', 'lim_grace_ms'))
  if not v or v ~= (rules or '0') then
    return nil
  end
  return {cap = tonumber(cap), rate = tonumber(rate), batch = tonumber(batch), near = tonumber(near),
    presence = tonumber(presence), grace = tonumber(grace)}
end
