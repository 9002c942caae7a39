-- delete_room.lua: remove a room, every key of it (queue.Store.DeleteRoom).
-- KEYS    the room's keys (Store.keys, then the signals hashes): KEYS[1]
--         meta hash, KEYS[2] wait, KEYS[3] active (expiry ms), KEYS[4]
--         pre-queue, KEYS[7] back, KEYS[8] priority lane
-- ARGV    force ('1' deletes whoever waits or is active), now (unix ms)
-- Returns -1 when the room does not exist, 0 when it is in use and not
-- forced (nothing changed), 1 when deleted. "In use": anyone waiting (the
-- pre-queue and the parked, who keep their places for a grace, included)
-- or an active slot expiring after now.
local meta, wait, active, pre, parked, back, lane = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6], KEYS[7], KEYS[8]
local force, now = ARGV[1], ARGV[2]

if redis.call('EXISTS', meta) == 0 then
  return -1
end
if force ~= '1' then
  local waiting = redis.call('ZCARD', wait) + redis.call('ZCARD', pre) + redis.call('ZCARD', back) +
    redis.call('ZCARD', parked) + redis.call('ZCARD', lane)
  if waiting > 0 or redis.call('ZCOUNT', active, '(' .. now, '+inf') > 0 then
    return 0
  end
end
redis.call('DEL', unpack(KEYS))
-- Every instance's view re-reads the room, finds it gone and drops it
-- (queue.Waker): <prefix>wake.
local prefix, name = string.match(meta, '^(.*){(.*)}:meta$')
redis.call('PUBLISH', prefix .. 'wake', name)
return 1
