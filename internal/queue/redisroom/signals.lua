-- signals.lua: add an instance's origin signals to the room's pool
-- (queue.Store.AddSignals).
-- KEYS[1] meta hash, KEYS[2] signals hash (n, errors, b<k>: queue.Signals)
-- ARGV    name/value pairs to add (queue.Signals.SignalPairs)
-- Returns {} when the room does not exist, else the pool as name/value
-- pairs.
local meta, signals = KEYS[1], KEYS[2]
if redis.call('EXISTS', meta) == 0 then
  return {}
end
for i = 1, #ARGV, 2 do
  redis.call('HINCRBY', signals, ARGV[i], ARGV[i + 1])
end
local pool = redis.call('HGETALL', signals)
pool[#pool + 1], pool[#pool + 2] = 'room', '1' -- never empty for a room
return pool
