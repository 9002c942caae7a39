-- reclaim.lua: prepended to the shard scripts that read the line's head
-- (peek.lua, pop.lua).
-- A step's pop records what it took from the shard: field t:<id> of the
-- shard's meta hash (a msgpack list of score, visitor, …), member <id>
-- of the leases zset (→ lease end, ms) and, for each visitor, a field of
-- the taken hash (visitor → id). ack.lua removes them. reclaim puts back
-- in the line whatever steps took and never acknowledged before their
-- lease ended (a scheduler that crashed or lost its connection between its
-- calls), with their scores, so they keep their places. A visitor whose
-- step did commit is then both active and waiting; the next commit.lua
-- that takes it drops it, and that step's ack.lua notes it in the
-- shard's copy of the admitted.
local function reclaim(wait, smeta, leases, taken, now)
  local dead = redis.call('ZRANGEBYSCORE', leases, '-inf', now)
  for i = 1, #dead do
    local rec = redis.call('HGET', smeta, 't:' .. dead[i])
    if rec then
      local pairs = cmsgpack.unpack(rec)
      for j = 1, #pairs, 2000 do
        redis.call('ZADD', wait, 'LT', unpack(pairs, j, math.min(j + 1999, #pairs)))
      end
      for j = 2, #pairs, 2 do
        if redis.call('HGET', taken, pairs[j]) == dead[i] then
          redis.call('HDEL', taken, pairs[j])
        end
      end
      redis.call('HDEL', smeta, 't:' .. dead[i])
    end
  end
  if #dead > 0 then
    redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
  end
end
