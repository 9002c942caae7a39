-- control_afresh.lua: prepended to both Redis stores' put_room.lua.

-- control_afresh starts a room's controller afresh when a write of its
-- settings switches it to adaptive admission (admission, the new value)
-- after an adaptive period: its fields go and its version moves on, so
-- that a step over the old state loses. Call it before writing the
-- settings.
local function control_afresh(meta, admission)
  if admission ~= 'adaptive' or redis.call('HGET', meta, 'admission') == 'adaptive' or
      (tonumber(redis.call('HGET', meta, 'ctl_version')) or 0) == 0 then
    return
  end
  for _, f in ipairs(redis.call('HKEYS', meta)) do
    if f == 'admit_rate_current' or (string.sub(f, 1, 4) == 'ctl_' and f ~= 'ctl_version') then
      redis.call('HDEL', meta, f)
    end
  end
  redis.call('HINCRBY', meta, 'ctl_version', 1)
end
