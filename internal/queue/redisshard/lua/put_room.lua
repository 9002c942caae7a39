-- put_room.lua: create or update a sharded room's settings on its home
-- shard (Store.PutRoom).
-- KEYS[1] home meta hash
-- ARGV    only_create ("1": leave an existing room as it is), then
--         setting name/value pairs (settings.go, settingFields)
-- Returns 1 created, 0 updated (or left as it was), -1 when the update
-- would change shards or shard_strategy, which are fixed at creation.
local meta = KEYS[1]
local exists = redis.call('EXISTS', meta) == 1
if exists and ARGV[1] == '1' then
  return 0
end
local set = {}
for i = 2, #ARGV, 2 do
  set[ARGV[i]] = ARGV[i + 1]
end
if exists then
  local shards, strategy = unpack(redis.call('HMGET', meta, 'shards', 'shard_strategy'))
  if shards ~= set['shards'] or strategy ~= set['shard_strategy'] then
    return -1
  end
end
for i = 2, #ARGV, 2 do
  redis.call('HSET', meta, ARGV[i], ARGV[i + 1])
end
if exists then
  return 0
end
return 1
