package queue

import "time"

// A room of more than one shard (Settings.Shards > 1) keeps its waiting
// line spread over several Redis Cluster shards, with the cap and the rate
// still exact for the room as a whole (issue 11 §3; redisqueue hands such
// rooms to package redisshard, whose comment says how). Its line has the
// core operations only: enter, status, leave and the admission step, in the
// room's state. The settings below say what it does not have yet; Validate
// refuses a sharded room that asks for them, naming the setting, rather than
// ignore it.
//
// memqueue keeps one line per room whatever Shards says (one process has
// one line to keep): it accepts and keeps the setting, with the same
// limits, so that a room's settings valid on one store are valid on the
// other, and a room tried on memory behaves as it will on Redis apart from
// where its line lives.

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

// ForShards is s for a room of several shards (s itself for one): what its
// line does not have yet is turned off where s leaves it at its default
// (presence parking, the inventory cap), and its claim window is its
// active_ttl (a sharded room holds a slot for active_ttl from admission).
// Queue.PutRoom and EnsureRoom apply it before Validate, so that a sharded
// room accepts every default; a value set otherwise is refused, naming the
// setting. OffForShards lists what is off.
func (s Settings) ForShards() Settings {
	if !s.Sharded() {
		return s
	}
	d := DefaultSettings()
	if s.PresenceTimeout == d.PresenceTimeout {
		s.PresenceTimeout = 0
	}
	if s.VisitorsPerUnit == d.VisitorsPerUnit {
		s.VisitorsPerUnit = 0
	}
	s.ClaimWindow = s.ActiveTTL
	return s
}

// OffForShards are the settings (by JSON name) that a room of several
// shards has off: its answer lists them.
var OffForShards = []string{"presence_timeout_seconds", "claim_window_seconds", "visitors_per_unit", "max_waiting", "admission", "opens_at", "priority_share"}

// checkShards is the shards setting's check after its range: for a
// sharded room, the settings its line does not support yet.
func checkShards(s Settings) error {
	if !s.Sharded() {
		return nil
	}
	// why says what the sharded line lacks.
	conflict := func(setting string, got any, want, why string) error {
		return invalid("%s %v: a room of %d shards needs %s (%s)", setting, got, s.Shards, want, why)
	}
	switch {
	case s.PresenceTimeout != 0:
		return conflict("presence_timeout", s.PresenceTimeout, "0", "presence parking is not sharded yet")
	case !s.OpensAt.IsZero():
		return conflict("opens_at", s.OpensAt.Format(time.RFC3339Nano), "none", "the opening draw is not sharded yet")
	case s.VisitorsPerUnit != 0:
		return conflict("visitors_per_unit", s.VisitorsPerUnit, "0", "the inventory cap is not sharded yet")
	case s.Admission != Static:
		return conflict("admission", s.Admission, "static", "adaptive admission is not sharded yet")
	case s.PriorityShare != 0:
		return conflict("priority_share", s.PriorityShare, "0", "priority lanes are not sharded yet")
	case s.MaxWaiting != 0:
		return conflict("max_waiting", s.MaxWaiting, "0", "the cap on the line is not sharded yet")
	case s.ClaimWindow != s.ActiveTTL:
		return conflict("claim_window", s.ClaimWindow, "the same as active_ttl",
			"a sharded room holds a slot for active_ttl from admission, with no claim window or renewal yet")
	}
	return nil
}
