-- stats.lua: a room's settings and counters in one consistent read (queue.Store.Stats).
-- KEYS[1] meta hash, KEYS[2] wait zset (seq), KEYS[3] active zset (expiry ms),
-- KEYS[4] pre-queue zset (draw.lua), KEYS[7] back zset (presence.lua),
-- KEYS[8] priority lane zset
-- ARGV    now (unix ms)
-- Returns {} when the room does not exist, else name/value pairs: every
-- field of the meta hash (the settings under their queue.SettingFields
-- names, seq, admitted_total, the draw's fields, …), then waiting (the
-- pre-queue and the parked visitors who came back included), pre_queue, lane, active and head_seq (-1 when nobody
-- waits). It never draws. While drawn entrants remain in the pre-queue,
-- head_seq is at most the seq the next of them will get.
local meta, wait, active, pre, back, lane = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[7], KEYS[8]
local now = ARGV[1]

local res = redis.call('HGETALL', meta)
if #res == 0 then
  return {}
end
local head = tonumber(redis.call('ZRANGE', wait, 0, 0, 'WITHSCORES')[2]) or -1
local queued = redis.call('ZCARD', pre)
local drawn, base, moved = unpack(redis.call('HMGET', meta, 'drawn', 'draw_base', 'draw_moved'))
if drawn == '1' and queued > 0 then
  local next = tonumber(base) + tonumber(moved) + 1
  if head == -1 or head > next then
    head = next
  end
end
local n = #res
local in_lane = redis.call('ZCARD', lane)
res[n + 1], res[n + 2] = 'waiting', redis.call('ZCARD', wait) + queued + redis.call('ZCARD', back) + in_lane
res[n + 3], res[n + 4] = 'pre_queue', queued
res[n + 5], res[n + 6] = 'active', redis.call('ZCOUNT', active, '(' .. now, '+inf')
res[n + 7], res[n + 8] = 'head_seq', head
res[n + 9], res[n + 10] = 'lane', in_lane
return res
