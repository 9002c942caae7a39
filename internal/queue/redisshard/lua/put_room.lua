-- put_room.lua: create or update a sharded room's settings on its home
-- shard (Store.PutRoom).
-- KEYS[1] home meta hash; with three keys, KEYS[2] is another store's hash
--         of the room's slot (redisqueue's, for a room of one shard): when
--         it holds settings, that store holds the room's name; the last key
--         is the slot's guard
-- ARGV    only_create ("1": leave an existing room as it is), then
--         name/value pairs written to the hash as they are: the queue's
--         settings, if any, then this package's (settings.go,
--         settingFields)
-- Returns {code, state, state_v}: code 1 created, 0 updated (or left as
-- it was), -1 when the update would change shards, shard_strategy or
-- shard_tags, which are fixed at creation, -2 when another store holds the
-- name (nothing is written); the room's state (open unless set) and its
-- version, for the line shards' copies (line_state.lua). A write
-- publishes the room's name on <prefix>wake.
--
-- A write that switches the queue's admission to adaptive starts the
-- room's controller afresh (redisroom's control_afresh).
--
-- A hash without settings (no state, no max_active: counters an older
-- instance wrote into a room Redis had lost) is no room: it is replaced.
-- state_v starts at the creation time in µs (Redis' clock), so that the
-- copies a lost room left on other shards are older than the new room's.
local meta = KEYS[1]
if #KEYS == 3 and redis.call('HEXISTS', KEYS[2], 'max_active') == 1 then
  return {-2, '', '0'}
end
local exists = redis.call('HEXISTS', meta, 'state') == 1 or redis.call('HEXISTS', meta, 'max_active') == 1
if exists and ARGV[1] == '1' then
  return {0, redis.call('HGET', meta, 'state'), redis.call('HGET', meta, 'state_v')}
end
local set = {}
for i = 2, #ARGV, 2 do
  set[ARGV[i]] = ARGV[i + 1]
end
if exists then
  local shards, strategy, tags = unpack(redis.call('HMGET', meta, 'shards', 'shard_strategy', 'shard_tags'))
  if shards ~= set['shards'] or strategy ~= set['shard_strategy'] or (tags or '') ~= (set['shard_tags'] or '') then
    return {-1, '', '0'}
  end
  redis.call('HINCRBY', meta, 'state_v', 1)
else
  redis.call('DEL', meta)
  local t = redis.call('TIME')
  redis.call('HSET', meta, 'state_v', t[1] .. string.format('%06d', tonumber(t[2])))
end
if exists and set['admission'] then -- the queue's settings (QueueStore)
  control_afresh(meta, set['admission'])
end
for i = 2, #ARGV, 2 do
  redis.call('HSET', meta, ARGV[i], ARGV[i + 1])
end
redis.call('HSETNX', meta, 'state', 'open')
-- Every instance's view re-reads the room (queue.Waker): <prefix>wake.
local prefix, name = string.match(meta, '^(.*){(.*)}:meta$')
redis.call('PUBLISH', prefix .. 'wake', name)
return {exists and 0 or 1, redis.call('HGET', meta, 'state'), redis.call('HGET', meta, 'state_v')}
