-- put_room.lua: create a room or replace its settings (queue.Store.PutRoom).
-- KEYS[1] meta hash
-- ARGV    state, max_active, admit_rate, interval_ns, active_ttl_ns,
--         claim_window_ns, batch, only_create ("1": leave an existing room
--         unchanged)
-- A new room starts with a full token bucket (batch tokens) and seq 0; an
-- existing room keeps its queue and counters, and its tokens are capped at
-- the new bucket capacity, batch + 1.
local meta = KEYS[1]
local batch = tonumber(ARGV[7])
local tokens = batch
local existed = redis.call('EXISTS', meta) == 1
if existed and ARGV[8] == '1' then
  return 0
end
if existed then
  tokens = math.min(tonumber(redis.call('HGET', meta, 'tokens')) or batch, batch + 1)
end
redis.call('HSET', meta,
  'state', ARGV[1], 'max_active', ARGV[2], 'admit_rate', ARGV[3],
  'interval', ARGV[4], 'active_ttl', ARGV[5], 'claim_window', ARGV[6],
  'batch', ARGV[7], 'tokens', string.format('%.17g', tokens))
if not existed then
  redis.call('HSET', meta, 'seq', 0, 'admitted_total', 0)
end
return existed and 0 or 1
