package redisqueue

import (
	"context"
	"errors"
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
// Stats adds the lines' lengths and brings the line shards' copies of the
// state up to the hash's (redisshard.SyncLines). The store learns that a
// room is sharded from the room's own scripts, which answer "sharded"
// (kind 7) instead of touching the line, and then remembers it: a room's
// shards are fixed while it exists, and a sharded room cannot be deleted
// yet. Only Redis losing the room (a flush, a failover to an empty
// replica) makes what the store remembers stale: redisshard then answers
// not found and writes nothing, and the store forgets the room (forget),
// which may be made again with any layout; redisshard takes the layout
// the room's hash holds at every PutRoom and Stats (SetLineState,
// SyncLines), so that an instance that never met a not found (the room
// was made again meanwhile) uses the new layout from its next refresh.
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
// room's state, as the hash holds it now with its version (state_v), goes
// to the line shards, and the store remembers the room. Of two PUTs whose
// copies cross, the copies keep the later state (line_state.lua).
func (s *Store) putSharded(ctx context.Context, op, room string, set queue.Settings) error {
	s.sharded.Store(room, true)
	v, err := s.c.Do(ctx, s.c.B().Hmget().Key(s.keys(room)[0]).Field("state", "state_v", "shard_tags").Build()).ToArray()
	if err != nil || len(v) < 3 {
		return unavailable(op, room, fmt.Errorf("reply %v: %v", v, err))
	}
	state, err1 := v[0].ToString()
	version, err2 := v[1].ToString()
	if err1 != nil || err2 != nil { // the room went meanwhile
		return notFound(op, room)
	}
	tags, _ := v[2].ToString() // none: the shard numbers
	if err := s.shard.SetLineState(ctx, room, int(set.Shards), redisshard.Strategy(set.ShardStrategy), tags, state, version); err != nil {
		return fmt.Errorf("redisqueue: %s %s: %w", op, room, err)
	}
	return nil
}

// forget drops what the store remembers of a room its sharded line
// answered not found for (Redis lost its keys: the room may be made again,
// sharded or not), and passes err on.
func (s *Store) forget(room string, err error) error {
	if errors.Is(err, queue.ErrRoomNotFound) {
		s.sharded.Delete(room)
	}
	return err
}

func (s *Store) enterSharded(ctx context.Context, room, visitor string, now time.Time) (queue.Entry, bool, error) {
	e, created, err := s.shard.Enter(ctx, room, visitor, now)
	if err != nil {
		return queue.Entry{}, false, s.forget(room, err)
	}
	return shardEntry(e), created, nil
}

func (s *Store) statusSharded(ctx context.Context, room, visitor string, now time.Time) (queue.Entry, error) {
	e, err := s.shard.Status(ctx, room, visitor, now)
	if err != nil {
		return queue.Entry{}, s.forget(room, err)
	}
	return shardEntry(e), nil
}

// shardEntry is e as queue.Entry: no sequence number.
func shardEntry(e redisshard.Entry) queue.Entry {
	return queue.Entry{Visitor: e.Visitor, Status: e.Status, Position: e.Position, ExpiresAt: e.ExpiresAt}
}

func (s *Store) admitSharded(ctx context.Context, room string, now time.Time) (queue.AdmitResult, error) {
	res, err := s.shard.Admit(ctx, room, now)
	return queue.AdmitResult{Admitted: res.Admitted}, s.forget(room, err)
}

func (s *Store) leaveSharded(ctx context.Context, room, visitor string) error {
	return s.forget(room, s.shard.Leave(ctx, room, visitor))
}

// statsSharded completes st, read by stats.lua, for a sharded room:
// Waiting counts every line shard; LastSeq and HeadSeq are 0 and 1, so
// that no status poll is answered from a view (entries have no Seq). The
// same calls bring the line shards' copies of the state up to the hash's
// version (redisshard.SyncLines), so that a copy a PUT left behind (it
// stopped between its two calls) or a shard lost is repaired at the next
// refresh.
func (s *Store) statsSharded(ctx context.Context, room string, st queue.Stats, stateVersion, tags string) (queue.Stats, error) {
	s.sharded.Store(room, true)
	n, err := s.shard.SyncLines(ctx, room, int(st.Settings.Shards), redisshard.Strategy(st.Settings.ShardStrategy),
		tags, string(st.Settings.State), stateVersion)
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
