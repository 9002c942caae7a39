package redisshard

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"usher/internal/queue"
)

// Strategy says how a sharded room orders its visitors across shards (seed
// 003 §7; docs/architecture.md#redis-hot-room-sharding compares them).
type Strategy string

const (
	// Counter (seed 003's A) scores each entrant with a room-wide sequence
	// number from one counter on the home shard; admission merges the
	// shards' heads. Exact order and positions; every entry costs a call
	// to the home shard.
	Counter = Strategy(queue.ShardCounter)
	// Timestamp (B) scores each entrant with the entering instance's clock,
	// kept strictly increasing per shard; admission merges the heads. Exact
	// positions in the room's admission order; the order follows the
	// instances' clocks (skew shows as order error).
	Timestamp = Strategy(queue.ShardTimestamp)
	// Estimate (C) keeps independent shard lines with their own sequence
	// numbers; positions are estimated from the local rank, and admission
	// takes from the shards round-robin.
	Estimate = Strategy(queue.ShardEstimate)
	// CountersOnly keeps nothing per waiting visitor: each shard is a
	// counter whose numbers are the turns; the ticket carries the shard
	// and the number (Claim), the room releases turns in order
	// (round-robin over the shards), and only a visitor who claims a
	// released turn is stored. Positions are the number minus the shard's
	// head (exact with one shard, counting those who left).
	CountersOnly Strategy = "counters-only"
)

// Strategies lists the strategies by name, seed 003's in its order first.
var Strategies = []Strategy{Counter, Timestamp, Estimate, CountersOnly}

// MaxShards bounds Settings.Shards: the room settings' bound.
const MaxShards = queue.MaxShards

// Settings are a sharded room's configuration, kept in the home shard's
// meta hash by name (settingFields).
type Settings struct {
	// Shards is how many lines the room's waiting visitors are spread over
	// (1 to MaxShards); fixed when the room is created.
	Shards int
	// Strategy orders the visitors across shards; fixed when the room is
	// created.
	Strategy Strategy
	// Tags names the hash tags of line shards 1 to Shards-1, comma
	// separated ("" for the shard numbers): chosen when the room is
	// created (Store.TagsFor) so that a Redis Cluster puts the shards on
	// distinct primaries, and fixed from then on.
	Tags string
	// MaxActive caps the room's admitted visitors at any moment, over all
	// shards and all schedulers.
	MaxActive int64
	// AdmitRate is the room-wide admission rate (visitors per second).
	AdmitRate float64
	// Interval is the schedulers' delay between steps; a step admits at
	// most AdmitRate × Interval + 1 (the bucket's capacity, as in queue).
	Interval time.Duration
	// ActiveTTL is how long an admitted visitor holds its slot (no
	// renewal here; Leave frees it at once).
	ActiveTTL time.Duration
	// ClaimWindow is how long a released turn of a CountersOnly room
	// holds a slot for its visitor to claim it (Claim).
	ClaimWindow time.Duration
}

// DefaultSettings are queue.DefaultSettings' cap, rate and interval, one
// shard, the counter strategy, and queue's ActiveTTL.
func DefaultSettings() Settings {
	d := queue.DefaultSettings()
	return Settings{
		Shards:      1,
		Strategy:    Counter,
		MaxActive:   d.MaxActive,
		AdmitRate:   d.AdmitRate,
		Interval:    d.Interval,
		ActiveTTL:   d.ActiveTTL,
		ClaimWindow: d.ClaimWindow,
	}
}

// Batch is what one step admits at most but one: AdmitRate × Interval
// rounded up, at least 1 (queue.Settings.Batch).
func (s Settings) Batch() int64 {
	return queue.Settings{AdmitRate: s.AdmitRate, Interval: s.Interval}.Batch()
}

// Validate returns queue.ErrInvalid naming the first setting out of range.
func (s Settings) Validate() error {
	switch {
	case s.Shards < 1 || s.Shards > MaxShards:
		return queue.ErrInvalid.Detail("shards: want 1 to %d, got %d", MaxShards, s.Shards)
	case !slices.Contains(Strategies, s.Strategy):
		return queue.ErrInvalid.Detail("shard_strategy: want one of %v, got %q", Strategies, s.Strategy)
	case s.MaxActive < 1:
		return queue.ErrInvalid.Detail("max_active: want at least 1, got %d", s.MaxActive)
	case !(s.AdmitRate > 0) || s.AdmitRate > 1e6:
		return queue.ErrInvalid.Detail("admit_rate: want above 0 and at most 1000000, got %g", s.AdmitRate)
	case s.Interval < time.Millisecond || s.Interval > time.Minute:
		return queue.ErrInvalid.Detail("interval: want 1ms to 1m, got %v", s.Interval)
	case s.ActiveTTL < time.Second:
		return queue.ErrInvalid.Detail("active_ttl: want at least 1s, got %v", s.ActiveTTL)
	case s.ClaimWindow < time.Second || s.ClaimWindow > s.ActiveTTL:
		return queue.ErrInvalid.Detail("claim_window: want 1s to active_ttl, got %v", s.ClaimWindow)
	}
	return nil
}

// settingField is one setting as the home meta hash holds it.
type settingField struct {
	name   string
	encode func(Settings) string
	decode func(*Settings, string) error
	// optional settings may be missing from a hash written before them.
	optional bool
}

// settingFields lists each setting once: its hash field, its encoding and
// its decoding. put_room.lua takes them as name/value pairs; reserve.lua
// and commit.lua read max_active, admit_rate, batch and active_ttl_ms by
// name.
var settingFields = []settingField{
	{"shards", func(s Settings) string { return strconv.Itoa(s.Shards) },
		func(s *Settings, v string) (err error) { s.Shards, err = strconv.Atoi(v); return err }, false},
	{"shard_strategy", func(s Settings) string { return string(s.Strategy) },
		func(s *Settings, v string) error { s.Strategy = Strategy(v); return nil }, false},
	{"shard_tags", func(s Settings) string { return s.Tags },
		func(s *Settings, v string) error { s.Tags = v; return nil }, true},
	{"max_active", func(s Settings) string { return strconv.FormatInt(s.MaxActive, 10) },
		func(s *Settings, v string) (err error) { s.MaxActive, err = strconv.ParseInt(v, 10, 64); return err }, false},
	{"admit_rate", func(s Settings) string { return strconv.FormatFloat(s.AdmitRate, 'g', -1, 64) },
		func(s *Settings, v string) (err error) { s.AdmitRate, err = strconv.ParseFloat(v, 64); return err }, false},
	{"interval_ms", func(s Settings) string { return strconv.FormatInt(s.Interval.Milliseconds(), 10) },
		func(s *Settings, v string) error { return decodeMillis(&s.Interval, v) }, false},
	{"batch", func(s Settings) string { return strconv.FormatInt(s.Batch(), 10) },
		func(*Settings, string) error { return nil }, false}, // derived
	{"active_ttl_ms", func(s Settings) string { return strconv.FormatInt(s.ActiveTTL.Milliseconds(), 10) },
		func(s *Settings, v string) error { return decodeMillis(&s.ActiveTTL, v) }, false},
	{"claim_window_ms", func(s Settings) string { return strconv.FormatInt(s.ClaimWindow.Milliseconds(), 10) },
		func(s *Settings, v string) error { return decodeMillis(&s.ClaimWindow, v) }, false},
}

func decodeMillis(d *time.Duration, v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	*d = time.Duration(n) * time.Millisecond
	return err
}

// settingPairs encodes s as name/value pairs for put_room.lua.
func settingPairs(s Settings) []string {
	out := make([]string, 0, 2*len(settingFields))
	for _, f := range settingFields {
		out = append(out, f.name, f.encode(s))
	}
	return out
}

// decodeSettings reads settings from the home meta hash by name.
func decodeSettings(named map[string]string) (Settings, error) {
	var s Settings
	for _, f := range settingFields {
		v, ok := named[f.name]
		if !ok && f.optional {
			continue
		}
		if !ok {
			return Settings{}, fmt.Errorf("setting %s missing", f.name)
		}
		if err := f.decode(&s, v); err != nil {
			return Settings{}, fmt.Errorf("setting %s: %w", f.name, err)
		}
	}
	return s, nil
}
