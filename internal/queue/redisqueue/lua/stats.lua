-- stats.lua: a room's settings and counters in one consistent read (queue.Store.Stats).
-- KEYS[1] meta hash, KEYS[2] wait zset (seq), KEYS[3] active zset (expiry ms)
-- ARGV    now (unix ms)
-- Returns {} when the room does not exist, else name/value pairs: every
-- field of the meta hash (the settings under their queue.SettingFields
-- names, seq, admitted_total, …), then waiting, active and head_seq
-- (-1 when nobody waits).
local meta, wait, active = KEYS[1], KEYS[2], KEYS[3]
local now = ARGV[1]

local res = redis.call('HGETALL', meta)
if #res == 0 then
  return {}
end
local head = redis.call('ZRANGE', wait, 0, 0, 'WITHSCORES')
local n = #res
res[n + 1], res[n + 2] = 'waiting', redis.call('ZCARD', wait)
res[n + 3], res[n + 4] = 'active', redis.call('ZCOUNT', active, '(' .. now, '+inf')
res[n + 5], res[n + 6] = 'head_seq', tonumber(head[2]) or -1
return res
