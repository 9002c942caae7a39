-- allow.lua: one GCRA decision for one key (limit.Store.Allow; limit.Decide
-- is the same algorithm in Go).
-- KEYS[1] the key's theoretical arrival time (unix microseconds)
local key = KEYS[1]
local now = tonumber(ARGV[1])      -- unix microseconds
local interval = tonumber(ARGV[2]) -- microseconds one event costs
local burst = tonumber(ARGV[3])    -- events allowed at once
local tat = math.max(tonumber(redis.call('GET', key)) or 0, now)
local next = tat + interval
local allow_at = next - burst * interval
if allow_at > now then
  return {0, allow_at - now}
end
redis.call('SET', key, string.format('%d', next), 'PX', math.ceil((next - now) / 1000))
return {1, 0}
