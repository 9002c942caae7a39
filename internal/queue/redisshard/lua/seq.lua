-- seq.lua: the next number of a counter in a room's meta hash, only if
-- the room exists (Store.Enter: counter's seq on the home shard,
-- counters-only's lseq on the visitor's shard), so that an instance that
-- remembers a room Redis has lost does not make its hash again.
-- KEYS[1] meta hash (home, or a line shard's with its copy of the state)
-- ARGV    the counter's field
-- Returns -1 when the hash has no state (no such room), else the number.
if redis.call('HEXISTS', KEYS[1], 'state') == 0 then
  return -1
end
return redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
