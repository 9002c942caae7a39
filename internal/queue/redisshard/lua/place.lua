-- place.lua: prepended to enter.lua and status.lua, which look a visitor
-- up on its shard the same way.
-- place returns the visitor's place as their reply {kind, score, rank,
-- expires_ms}, or nil when the shard has none for it, and the shard's copy
-- of the room's state. In this order: 0 the room does not exist (no copy
-- of its state); 3 admitted (the shard's copy, read before the line: a
-- visitor both admitted and in line, a step's record reclaimed after its
-- commit, is admitted); 2 in line (rank 0-based within the shard); 5 taken
-- by a step in flight (the score from the taken hash, "<step>:<score>", 0
-- if it holds the step alone).
local function place(wait, smeta, admitted, taken, visitor, now)
  local state = redis.call('HGET', smeta, 'state')
  if not state then
    return {0, 0, 0, 0}, nil
  end
  local exp = tonumber(redis.call('ZSCORE', admitted, visitor))
  if exp and exp > now then
    return {3, 0, 0, exp}, state
  end
  local score = redis.call('ZSCORE', wait, visitor)
  if score then
    return {2, tonumber(score), redis.call('ZRANK', wait, visitor), 0}, state
  end
  local owner = redis.call('HGET', taken, visitor)
  if owner then
    return {5, tonumber(string.match(owner, ':(.+)$')) or 0, 0, 0}, state
  end
  return nil, state
end

