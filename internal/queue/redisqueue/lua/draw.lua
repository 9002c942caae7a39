-- draw.lua: prepended to enter.lua, status.lua, leave.lua and admit.lua:
-- the opening draw (queue/draw.go).
--
-- The pre-queue is the sorted set KEYS[4]. Every member has score 0 and is
-- the visitor's draw key (32 bytes, computed by the caller, which alone
-- knows HMAC-SHA256) followed by its id, so that the set's lexical order is
-- the draw order. Meta fields: draw_seed (hex), draw_commitment (hex of
-- SHA-256 of the seed: the caller proves it computed the key with this seed
-- by sending it), drawn ('1' after the draw), draw_base (seq at the draw),
-- draw_entrants, draw_moved.
--
-- The draw itself is O(1): it reserves draw_entrants sequence numbers
-- after draw_base. Entrants stay in the pre-queue, ahead of every later
-- entrant, until an admission step reaches them and moves them into the
-- wait set with seqs draw_base+1, +2, … in draw order (draw_moved counts
-- them), so the opening never blocks Redis for a long pre-queue.

-- draw_phase draws when due and returns the room's phase: nil when the
-- pre-queue plays no part (no draw, or every drawn entrant moved); 'pre'
-- before the draw; 'drawn' after it while entrants remain in the
-- pre-queue. Then the commitment, and for 'drawn' draw_base,
-- draw_entrants and draw_moved as numbers. commitment, drawn and opens
-- are the meta fields draw_commitment, drawn and opens_at as the caller
-- read them (in the HMGET of its other fields).
local function draw_phase(meta, pre, now, commitment, drawn, opens)
  if not commitment then
    return nil
  end
  if drawn ~= '1' then
    opens = tonumber(opens) or 0
    if opens ~= 0 and now < opens then
      return 'pre', commitment
    end
    local n = redis.call('ZCARD', pre)
    local base = redis.call('HINCRBY', meta, 'seq', n) - n
    redis.call('HSET', meta, 'drawn', 1, 'draw_base', base, 'draw_entrants', n, 'draw_moved', 0)
  end
  if redis.call('EXISTS', pre) == 0 then
    return nil
  end
  local base, entrants, moved =
    unpack(redis.call('HMGET', meta, 'draw_base', 'draw_entrants', 'draw_moved'))
  return 'drawn', commitment, tonumber(base), tonumber(entrants), tonumber(moved)
end

-- pre_entry returns the kind-2 entry of a visitor in the pre-queue
-- ({2, seq, position, 0}), or nil. Before the draw, seq and position are 0.
-- After it, position is exact (back counts the parked visitors who came
-- back: they go first) and seq is the one the visitor will get when moved
-- if nobody ahead leaves (it only ever decreases).
local function pre_entry(wait, pre, member, phase, base, entrants, moved, back)
  local rank = redis.call('ZRANK', pre, member)
  if not rank then
    return nil
  end
  if phase == 'pre' then
    return {2, 0, 0, 0}
  end
  return {2, base + moved + rank + 1,
    redis.call('ZCOUNT', wait, '-inf', base + entrants) + back + rank + 1, 0}
end

-- behind_pre returns how many pre-queue entrants wait ahead of a visitor
-- with seq in the wait set: all of them when it entered after the draw.
local function behind_pre(pre, seq, phase, base, entrants)
  if phase == 'drawn' and seq > base + entrants then
    return redis.call('ZCARD', pre)
  end
  return 0
end
