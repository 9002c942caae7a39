-- claim.lua: a counters-only room's ticket poll (Store.Claim), on the home
-- shard: where the turn (shard, seq) stands, and a slot for its visitor
-- once the turn is released.
-- KEYS[1] home meta hash, KEYS[2] active zset, KEYS[3] turns zset,
-- KEYS[4] turn_ends zset (release.lua)
-- ARGV    visitor, now (ms), shard, seq
-- Returns {kind, n, expires_ms}: kind 0 room not found; 2 waiting, n =
-- turns of the shard still ahead (seq − the shard's head); 3 active
-- (claimed now or before); 4 gone: the turn was released and its claim
-- window has passed, or its batch was claimed in full already (a ticket
-- used twice).
local meta, active, turns, ends = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local visitor, now, shard, seq = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])

local ttl = redis.call('HGET', meta, 'active_ttl_ms')
if not ttl then
  return {0, 0, 0}
end
local exp = tonumber(redis.call('ZSCORE', active, visitor))
if exp and exp > now then
  return {3, 0, exp}
end
local head = tonumber(redis.call('HGET', meta, 'h:' .. shard)) or 0
if seq > head then
  return {2, seq - head, 0}
end
local base = shard * 1099511627776
local b = redis.call('ZREVRANGEBYSCORE', turns, base + seq, base, 'LIMIT', 0, 1)[1]
if not b then
  return {4, 0, 0}
end
local _, first, last = string.match(b, '^(%d+):(%d+):(%d+)$')
local until_ms = tonumber(redis.call('ZSCORE', ends, b))
if seq > tonumber(last) or not until_ms or until_ms <= now then
  return {4, 0, 0}
end
if redis.call('HINCRBY', meta, 'c:' .. b, 1) > tonumber(last) - tonumber(first) + 1 then
  redis.call('HINCRBY', meta, 'c:' .. b, -1)
  return {4, 0, 0}
end
exp = now + tonumber(ttl)
redis.call('ZADD', active, exp, visitor)
return {3, 0, exp}
