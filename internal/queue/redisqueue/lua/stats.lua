-- stats.lua: a room's settings and counters in one consistent read (queue.Store.Stats).
-- KEYS[1] meta hash, KEYS[2] wait zset (seq), KEYS[3] active zset (expiry ms)
-- ARGV    now (unix ms)
-- Returns {} when the room does not exist, else {state, max_active,
-- admit_rate, interval, active_ttl, claim_window, seq, admitted_total,
-- waiting, active, head_seq}; head_seq is -1 when nobody waits.
local m = redis.call('HMGET', KEYS[1], 'state', 'max_active', 'admit_rate',
  'interval', 'active_ttl', 'claim_window', 'seq', 'admitted_total')
if not m[1] then
  return {}
end
m[9] = redis.call('ZCARD', KEYS[2])
m[10] = redis.call('ZCOUNT', KEYS[3], '(' .. ARGV[1], '+inf')
local head = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
m[11] = head[2] or -1
return m
