-- reclaim.lua: prepended to the shard scripts that read the line's head
-- (peek.lua, pop.lua) and to ack.lua (take_record).
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

-- take_record ends step id's record on a shard (its t:<id> field, and
-- the taken hash's fields that still name the step) and returns the
-- visitors still in it (visitor → score), and whether there was a record.
local function take_record(smeta, taken, id)
  local held = {}
  local rec = redis.call('HGET', smeta, 't:' .. id)
  if not rec then
    return held, false
  end
  local items = cmsgpack.unpack(rec)
  for j = 2, #items, 2 do
    if step_of(redis.call('HGET', taken, items[j])) == id then
      held[items[j]] = items[j - 1]
      redis.call('HDEL', taken, items[j])
    end
  end
  redis.call('HDEL', smeta, 't:' .. id)
  return held, true
end

local function reclaim(wait, smeta, leases, taken, now)
  local dead = redis.call('ZRANGEBYSCORE', leases, '-inf', now)
  for i = 1, #dead do
    for v, score in pairs((take_record(smeta, taken, dead[i]))) do
      redis.call('ZADD', wait, 'LT', score, v)
    end
  end
  if #dead > 0 then
    redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
  end
end
