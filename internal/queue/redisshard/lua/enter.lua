-- enter.lua: put a visitor in its shard's line, or return its place there
-- (Store.Enter).
-- KEYS[1] wait zset (visitor → score), KEYS[2] shard meta hash, KEYS[3]
-- admitted zset (the shard's copy of its admitted visitors → expiry ms,
-- written by ack.lua), KEYS[4] taken hash (visitor → the step in flight
-- that took it, written by pop.lua)
-- ARGV    visitor, now (ms), strategy, score (counter: the room's sequence
--         number from the home shard, seq.lua; else unused)
-- Returns {kind, score, rank, expires_ms}: kind 0 the room does not
-- exist (the shard's meta has no copy of its state: every line shard gets
-- one, shard 0's meta is the home hash), 1 put in line now, 2 in line
-- already (its old score), 3 admitted, 5 taken by a step in flight (it
-- keeps that place: being admitted), 6 refused: the shard's copy of the
-- room's state (Store.SetLineState; QueueStore copies its effective
-- state) is closed or sold_out, or (shard 0, whose meta is the home hash)
-- its inventory is 0; rank is 0-based within the shard. Nothing is
-- written unless kind is 1.
--
-- The lookup is place.lua's, prepended, as status.lua's.
--
-- The score orders the shard's line and, across shards, the room's:
--   counter    the room-wide sequence number (one HINCRBY on the home shard)
--   timestamp  now × 1024, or one more than the shard's last score if
--              that is not above it: strictly increasing within a shard,
--              and across shards ordered by the entering instances' clocks
--              (ties broken by shard index; 1,024 per ms per shard keep
--              pace with the clock; scores stay exact doubles until 2248)
--   estimate   the shard's own sequence number, lseq (no order across shards)
local wait, smeta, admitted, taken = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local visitor, now, strategy = ARGV[1], tonumber(ARGV[2]), ARGV[3]

local found, state = place(wait, smeta, admitted, taken, visitor, now)
if found then
  return found
end
if state == 'closed' or state == 'sold_out' or redis.call('HGET', smeta, 'inventory') == '0' or
    redis.call('HGET', smeta, 'queueing') == 'reject' then
  return {6, 0, 0, 0}
end
local score
if strategy == 'counter' then
  score = tonumber(ARGV[4])
elseif strategy == 'timestamp' then
  score = now * 1024
  local last = tonumber(redis.call('HGET', smeta, 'last')) or 0
  if score <= last then
    score = last + 1
  end
  redis.call('HSET', smeta, 'last', string.format('%.17g', score))
else
  score = redis.call('HINCRBY', smeta, 'lseq', 1)
end
redis.call('ZADD', wait, score, visitor)
return {1, score, redis.call('ZRANK', wait, visitor), 0}
