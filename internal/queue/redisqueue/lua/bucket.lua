-- bucket.lua: prepended to enter.lua and admit.lua, which share the room's
-- token bucket (queue.Store.Admit documents it).
-- refill returns the tokens and the refill time at now: AdmitRate per
-- second since the last refill, up to batch + 1 (the +1 keeps the fraction
-- a step leaves). A now earlier than the last refill (a scheduler with a
-- slow clock) adds nothing. tokens and refilled are the hash's strings (nil
-- before the first refill).
local function refill(tokens, refilled, rate, batch, now)
  tokens, refilled = tonumber(tokens), tonumber(refilled)
  if not refilled or now > refilled then
    if refilled then
      tokens = tokens + rate * (now - refilled) / 1000
    end
    refilled = now
  end
  return math.min(tokens, batch + 1), refilled
end
