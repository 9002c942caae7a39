-- refill.lua: prepended to the scripts that keep a room's token bucket
-- (redisqueue's enter.lua and admit.lua, redisshard's reserve.lua, commit.lua and
-- release.lua).
-- refill returns the tokens and the refill time at now: rate per second
-- since the last refill, up to batch + 1 (the +1 keeps the fraction a
-- step leaves). A now earlier than the last refill (a scheduler with a
-- slow clock) adds nothing. tokens and refilled are the hash's strings:
-- a bucket never refilled starts with the tokens its room was made with,
-- or batch.
local function refill(tokens, refilled, rate, batch, now)
  tokens, refilled = tonumber(tokens) or batch, tonumber(refilled)
  if not refilled or now > refilled then
    if refilled then
      tokens = tokens + rate * (now - refilled) / 1000
    end
    refilled = now
  end
  return math.min(tokens, batch + 1), refilled
end
