package queue

// A room of more than one shard (Settings.Shards > 1) keeps its waiting
// line spread over several Redis Cluster shards, with the cap and the rate
// still exact for the room as a whole. Only a store that can keep such a
// line accepts it (redisroute hands it to redisshard); the store refuses,
// naming the setting, what its line cannot do, and lists it in Stats.Off.

// ShardStrategy says how a sharded room orders its visitors across
// shards (redisshard.Strategy; docs/benchmarks.md compares them).
type ShardStrategy string

const (
	// ShardCounter scores each entrant with a room-wide sequence number
	// from one counter on the room's home shard: exact FIFO, but every
	// entry costs a call to the home shard.
	ShardCounter ShardStrategy = "counter"
	// ShardTimestamp scores each entrant with the entering instance's
	// clock: FIFO as far as the instances' clocks agree, exact positions,
	// and an entry costs one call to the visitor's shard only. The default
	// (docs/operations.md).
	ShardTimestamp ShardStrategy = "timestamp"
	// ShardEstimate keeps independent lines, admitted round-robin:
	// positions are estimates, order is FIFO within a shard only.
	ShardEstimate ShardStrategy = "estimate"
)

// ShardStrategies lists the strategies a room may name.
var ShardStrategies = []ShardStrategy{ShardCounter, ShardTimestamp, ShardEstimate}

// MaxShards bounds Settings.Shards (and redisshard's).
const MaxShards = 64

// ErrShardsFixed: settings that change an existing room's shards, or the
// shard_strategy of a room of several (a visitor's shard depends on both;
// a room of one shard has no line shards).
var ErrShardsFixed = ErrInvalid.Detail("shards, shard_strategy: fixed when the room was created; make a new room for another layout")

// Sharded reports whether the room's line is spread over several shards.
func (s Settings) Sharded() bool { return s.Shards > 1 }
