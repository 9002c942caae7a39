-- line_state.lua: a line shard's copy of the room's state (Store.SyncLines,
-- SetLineState): written only when its version is at least the copy's,
-- so that of two writers the one that read the older state loses, in
-- whatever order they arrive (two of the same version read the same hash:
-- PutRoom's copy of the state set, then QueueStore's of the state in
-- effect).
-- KEYS[1] line shard meta hash, KEYS[2] wait zset
-- ARGV    state, version (the home hash's state_v: put_room.lua starts it
--         at the creation time in µs and adds one at every update)
-- Returns the number of visitors in the shard's line.
local smeta, wait = KEYS[1], KEYS[2]
local state, version = ARGV[1], tonumber(ARGV[2])
local have = tonumber(redis.call('HGET', smeta, 'state_v'))
if not have or version >= have then
  redis.call('HSET', smeta, 'state', state, 'state_v', ARGV[2])
end
return redis.call('ZCARD', wait)
