-- get.lua: a live hold's record (hold.Store.Get).
-- ARGV[3] id
-- Returns the record "holder quantity expiry_ms seat...", or nil when the
-- hold is not live.
return redis.call('HGET', hold_key, ARGV[3])
