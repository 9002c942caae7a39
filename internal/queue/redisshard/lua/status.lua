-- status.lua: a visitor's place in its shard (Store.Status), by place.lua's
-- lookup (prepended), as enter.lua finds it.
-- KEYS[1] wait zset, KEYS[2] shard meta hash, KEYS[3] admitted zset,
-- KEYS[4] taken hash
-- ARGV    visitor, now (ms)
-- Returns {kind, score, rank, expires_ms}: kind 0 the room does not exist
-- (no copy of its state, as enter.lua), 3 admitted (the shard's copy,
-- read before the line as enter.lua does), 2 waiting (rank 0-based within
-- the shard), 5 taken by a step that has not acknowledged yet (being
-- admitted; score from the taken hash, "<step>:<score>", 0 if it holds
-- the step alone), 4 none of these (the home
-- shard's active set has the last word).
local wait, smeta, admitted, taken = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local visitor, now = ARGV[1], tonumber(ARGV[2])

return place(wait, smeta, admitted, taken, visitor, now) or {4, 0, 0, 0}
