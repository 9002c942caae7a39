package redisqueue

import (
	"context"
	"fmt"
	"time"

	"usher/internal/queue"
	"usher/internal/queue/redisshard"
)

// A room of more than one shard (queue.Settings.Shards > 1) keeps its
// waiting line in package redisshard, and the rest here, in one record:
// redisshard's home meta hash is this store's meta hash (the same key,
// <prefix>{<room>}:meta), and so are the active set and line shard 0's
// line (<prefix>{<room>}:active, :wait). The hash holds the room's
// settings by queue.SettingFields name, as every room's does, plus the
// few redisshard reads by its own names (redisshard.SettingPairs), so
// that put_room.lua writes both in one step, Rooms lists the room, and
// stats.lua reads its settings and counters (admitted_total, the active
// set) as for any room. Line shards 1 to Shards-1 have hash tags of their
// own ({<room>#<i>}), which Redis Cluster may place on other primaries.
//
// Enter, Status, Leave and Admit of a sharded room go to redisshard;
// Stats adds the lines' lengths. The store learns that a room is sharded
// from the room's own scripts, which answer "sharded" (kind 7) instead of
// touching the line, and then remembers it: a room's shards are fixed
// while it exists, and a sharded room cannot be deleted yet, so what the
// store remembers never goes stale.
//
// What a sharded room does (docs/operations.md#one-hot-room-over-several-shards):
// its state holds (paused and closed rooms admit nobody, closed and
// sold-out ones refuse newcomers: put_room writes the state to every line
// shard, SetLineState); the cap and the rate are exact for the room. What
// it does not (queue.Settings.Validate refuses the settings): presence
// parking, the opening draw, the inventory cap (SetInventory refuses),
// adaptive admission, max_waiting, the claim window and renewal (an
// admitted visitor holds the slot for active_ttl from admission; Leave
// frees it). Nor passthrough: a newcomer waits for the next step, and
// DeleteRoom refuses. Entries carry no sequence number (Seq 0), so every
// status poll reaches the store; Enter's Position is the estimate from
// the visitor's shard, Status's is exact (counter, timestamp).

// kindSharded is the reply of a room's script when the room is sharded.
const kindSharded = 7

// isSharded reports whether the store knows the room to be sharded.
func (s *Store) isSharded(room string) bool {
	_, ok := s.sharded.Load(room)
	return ok
}

// shardSettings is the part of set that redisshard keeps.
func shardSettings(set queue.Settings) redisshard.Settings {
	return redisshard.Settings{
		Shards: int(set.Shards), Strategy: redisshard.Strategy(set.ShardStrategy),
		MaxActive: set.MaxActive, AdmitRate: set.AdmitRate, Interval: set.Interval,
		ActiveTTL: set.ActiveTTL, ClaimWindow: set.ClaimWindow,
	}
}

// putSharded follows put_room.lua for a sharded room that it wrote: the
// room's state goes to the line shards, and the store remembers the room.
func (s *Store) putSharded(ctx context.Context, op, room string, set queue.Settings) error {
	s.sharded.Store(room, true)
	if err := s.shard.SetLineState(ctx, room, int(set.Shards), string(set.State)); err != nil {
		return fmt.Errorf("redisqueue: %s %s: %w", op, room, err)
	}
	return nil
}

func (s *Store) enterSharded(ctx context.Context, room, visitor string, now time.Time) (queue.Entry, bool, error) {
	e, created, err := s.shard.Enter(ctx, room, visitor, now)
	if err != nil {
		return queue.Entry{}, false, err
	}
	return shardEntry(e), created, nil
}

func (s *Store) statusSharded(ctx context.Context, room, visitor string, now time.Time) (queue.Entry, error) {
	e, err := s.shard.Status(ctx, room, visitor, now)
	if err != nil {
		return queue.Entry{}, err
	}
	return shardEntry(e), nil
}

// shardEntry is e as queue.Entry: no sequence number.
func shardEntry(e redisshard.Entry) queue.Entry {
	return queue.Entry{Visitor: e.Visitor, Status: e.Status, Position: e.Position, ExpiresAt: e.ExpiresAt}
}

func (s *Store) admitSharded(ctx context.Context, room string, now time.Time) (queue.AdmitResult, error) {
	res, err := s.shard.Admit(ctx, room, now)
	return queue.AdmitResult{Admitted: res.Admitted}, err
}

// statsSharded completes st, read by stats.lua, for a sharded room:
// Waiting counts every line shard; LastSeq and HeadSeq are 0 and 1, so
// that no status poll is answered from a view (entries have no Seq).
func (s *Store) statsSharded(ctx context.Context, room string, st queue.Stats) (queue.Stats, error) {
	s.sharded.Store(room, true)
	n, err := s.shard.Waiting(ctx, room, int(st.Settings.Shards))
	if err != nil {
		return queue.Stats{}, fmt.Errorf("redisqueue: stats %s: %w", room, err)
	}
	st.Waiting, st.LastSeq, st.HeadSeq = n, 0, 1
	return st, nil
}

// errShardedInventory and errShardedDelete are the refusals of what a sharded room has not yet.
var (
	errShardedInventory = queue.ErrInvalid.Detail("inventory: a room of several shards keeps no inventory yet")
	errShardedDelete    = queue.ErrInvalid.Detail("room: a room of several shards cannot be deleted yet")
)
