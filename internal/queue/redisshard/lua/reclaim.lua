-- reclaim.lua: prepended to the shard scripts that read the line's head
-- (peek.lua, pop.lua).
-- A step's pop records what it took from the shard: field t:<id> of the
-- shard's meta hash (a msgpack list of score, visitor, …), member <id>
-- of the leases zset (→ lease end, ms) and, for each visitor, a field of
-- the taken hash (visitor → "<id>:<score>"). A visitor is in the step's
-- record while the taken hash names the step for it (leave.lua removes
-- only that field). ack.lua removes them. reclaim puts back
-- in the line whatever steps took and never acknowledged before their
-- lease ended (a scheduler that crashed or lost its connection between its
-- calls), with their scores, so they keep their places. A visitor whose
-- step did commit is then both active and waiting; the next commit.lua
-- that takes it drops it, and that step's ack.lua notes it in the
-- shard's copy of the admitted.
-- step_of is the step a taken hash value names ("<id>:<score>", or "<id>"
-- as written before the score was kept there).
local function step_of(owner)
  return owner and string.match(owner, '^[^:]+')
end

local function reclaim(wait, smeta, leases, taken, now)
  local dead = redis.call('ZRANGEBYSCORE', leases, '-inf', now)
  for i = 1, #dead do
    local rec = redis.call('HGET', smeta, 't:' .. dead[i])
    if rec then
      local pairs = cmsgpack.unpack(rec)
      for j = 2, #pairs, 2 do
        if step_of(redis.call('HGET', taken, pairs[j])) == dead[i] then
          redis.call('ZADD', wait, 'LT', pairs[j - 1], pairs[j])
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
