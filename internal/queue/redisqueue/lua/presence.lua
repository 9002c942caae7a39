-- presence.lua: prepended to enter.lua and status.lua: a waiting visitor's
-- place in the line with presence (admit.lua). KEYS: wait, seen, parked
-- (absent visitors taken out of the line: visitor → seq) and back (parked
-- visitors who came back, visitor → seq: the next step admits them first).

-- waiting_entry returns the kind-2 entry ({2, seq, position, 0}) of a
-- visitor in the line, or nil. A parked visitor comes back: it moves to
-- back. Every answer counts as seeing the visitor. Positions count the
-- visitors who came back (they go first) and, through ahead_pre, drawn
-- entrants still in the pre-queue.
local function waiting_entry(wait, seen, parked, back, visitor, now, ahead_pre)
  local seq = tonumber(redis.call('ZSCORE', wait, visitor))
  if seq then
    redis.call('ZADD', seen, 'XX', now, visitor)
    return {2, seq, redis.call('ZRANK', wait, visitor) + 1 + redis.call('ZCARD', back) + ahead_pre(seq), 0}
  end
  seq = tonumber(redis.call('ZSCORE', parked, visitor))
  if seq then
    redis.call('ZREM', parked, visitor)
    redis.call('ZADD', back, seq, visitor)
  end
  seq = tonumber(redis.call('ZSCORE', back, visitor))
  if seq then
    redis.call('ZADD', seen, 'XX', now, visitor)
    return {2, seq, redis.call('ZRANK', back, visitor) + 1, 0}
  end
  return nil
end
