-- put_room.lua: create a room or replace its settings (queue.Store.PutRoom).
-- KEYS[1] meta hash; with three keys, KEYS[2] is another store's hash of
--         the room's slot (redisshard's, for a room of several shards):
--         when it holds settings, that store holds the room's name; the
--         last key is the slot's guard
-- ARGV    only_create ("1": leave an existing room unchanged), batch, a
--         draw seed and its commitment (hex; "" when the settings have no
--         opens_at), then the settings as name/value pairs
--         (queue.SettingFields), written to the hash as they are
-- A new room starts with a full token bucket (batch tokens) and seq 0; an
-- existing room keeps its queue and counters, and its tokens are capped at
-- the new bucket capacity, batch + 1. The first seed given is kept for
-- good (draw.lua). A room draws once: after its draw, settings whose
-- opens_at differs are refused (-1) and nothing is written, and so is a
-- room whose name another store holds (-2).
-- Returns 1 when the room was created, else 0; a write bumps rules_v
-- (limits.lua) and publishes the room's name on <prefix>wake.
--
-- A hash without settings (no state and no max_active) is no room: it is
-- replaced.
local meta = KEYS[1]
if #KEYS == 3 and redis.call('HEXISTS', KEYS[2], 'max_active') == 1 then
  return -2
end
local only_create, batch, seed, commitment = ARGV[1] == '1', tonumber(ARGV[2]), ARGV[3], ARGV[4]

local existed = redis.call('HEXISTS', meta, 'state') == 1 or redis.call('HEXISTS', meta, 'max_active') == 1
if existed and only_create then
  return 0
end
if not existed then
  redis.call('DEL', meta)
end
if existed and redis.call('HGET', meta, 'drawn') == '1' then
  for i = 5, #ARGV, 2 do
    if ARGV[i] == 'opens_at' and ARGV[i + 1] ~= redis.call('HGET', meta, 'opens_at') then
      return -1
    end
  end
end
for i = 5, #ARGV, 2 do
  if existed and ARGV[i] == 'admission' then
    control_afresh(meta, ARGV[i + 1])
  end
end
local tokens = batch
if existed then
  tokens = math.min(tonumber(redis.call('HGET', meta, 'tokens')) or batch, batch + 1)
end
redis.call('HSET', meta, 'batch', batch, 'tokens', string.format('%.17g', tokens),
  unpack(ARGV, 5))
if seed ~= '' and redis.call('HSETNX', meta, 'draw_seed', seed) == 1 then
  redis.call('HSET', meta, 'draw_commitment', commitment)
end
if not existed then
  redis.call('HSET', meta, 'seq', 0, 'admitted_total', 0)
end
redis.call('HINCRBY', meta, 'rules_v', 1)
-- Every instance's view re-reads the room (queue.Waker): <prefix>wake.
local prefix, name = string.match(meta, '^(.*){(.*)}:meta$')
redis.call('PUBLISH', prefix .. 'wake', name)
return existed and 0 or 1
