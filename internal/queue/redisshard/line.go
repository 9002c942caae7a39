package redisshard

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/queue"
)

// Result kinds of enter.lua and status.lua.
const (
	kindNotFound = 0
	kindCreated  = 1
	kindWaiting  = 2
	kindAdmitted = 3
	kindNone     = 4
	kindTaken    = 5
	kindRefused  = 6
)

// Entry is a visitor's place in a sharded room.
type Entry struct {
	Visitor string
	Status  queue.EntryStatus
	// Shard is the line shard that holds the visitor (ShardOf).
	Shard int
	// Score orders the visitor in its shard and, for Counter and Timestamp,
	// in the room: Counter's room-wide sequence number, Timestamp's
	// milliseconds × 1024 (made unique per shard), Estimate's sequence
	// number within the shard. Set when Waiting.
	Score int64
	// Position is 1 for the head of the room's line, when Waiting. It is
	// exact (Estimated false) from Status under Counter and Timestamp, and
	// with one shard; otherwise estimated from the rank in the shard.
	Position  int64
	Estimated bool
	// ExpiresAt is when the slot lapses, when Active.
	ExpiresAt time.Time
}

// estimate is the position of the visitor at rank (0-based) in one of k
// shards taken from round-robin: rank full rounds ahead, and half a round.
func estimate(rank int64, k int) int64 { return rank*int64(k) + int64(k+1)/2 }

// Enter puts visitor in the room's line, or returns its entry: the same
// place for a visitor already waiting (created false), Waiting at
// position 1 for one an admission step has taken and not finished with
// (it is being admitted: a reload must not give it a new place), Active
// for one admitted (a visitor in a step's record is asked about at the
// home shard: the step may have committed it and lost its ack); queue.ErrRoomNotFound when the visitor's shard has no
// copy of the room's state (the room does not exist, or Redis lost it:
// nothing is written then); queue.ErrRoomClosed for a newcomer when the shard's copy of
// the room's state (SetLineState) is closed or sold_out. Its Position is the estimate from the rank in the shard
// (exact with one shard); Status gives the exact one. Under Counter it
// costs a call to the home shard (the sequence number) and one to the
// visitor's shard; otherwise one to the visitor's shard.
func (s *Store) Enter(ctx context.Context, room, visitor string, now time.Time) (Entry, bool, error) {
	l, err := s.layoutOf(ctx, "enter", room)
	if err != nil {
		return Entry{}, false, err
	}
	if l.strategy == CountersOnly {
		return s.enterCounters(ctx, room, visitor, l)
	}
	seq := ""
	if l.strategy == Counter {
		hk := s.homeKeys(room)
		n, err := s.next(ctx, "enter", room, []string{hk[0], hk[3]}, "seq")
		if err != nil {
			return Entry{}, false, err
		}
		seq = strconv.FormatInt(n, 10)
	}
	i := ShardOf(visitor, l.shards)
	k := l.keys[i]
	r, err := s.exec(ctx, s.enter, pick(k, kWait, kMeta, kAdmitted, kTaken, kGuard), []string{visitor, ms(now), string(l.strategy), seq}).AsIntSlice()
	if err != nil || len(r) < 4 {
		return Entry{}, false, unavailable("enter", room, fmt.Errorf("reply %v: %v", r, err))
	}
	e := Entry{Visitor: visitor, Shard: i}
	switch r[0] {
	case kindNotFound:
		return Entry{}, false, s.notFound("enter", room)
	case kindAdmitted:
		e.Status, e.ExpiresAt = queue.Active, time.UnixMilli(r[3]).UTC()
		return e, false, nil
	case kindRefused:
		return Entry{}, false, fmt.Errorf("redisshard: enter %s: %w", room, queue.ErrRoomClosed)
	case kindTaken:
		e, err := s.takenStatus(ctx, "enter", room, visitor, now, e)
		return e, false, err
	}
	e.Status, e.Score = queue.Waiting, r[1]
	e.Position, e.Estimated = estimate(r[2], l.shards), l.shards > 1
	return e, r[0] == kindCreated, nil
}

// Status returns the visitor's entry: Waiting with its position (exact
// under Counter and Timestamp: the number of visitors of every shard who
// come before it in the merge order, plus one; estimated under Estimate),
// Active, or Gone (never entered, left, or its slot lapsed). A visitor
// taken by an admission step that has not finished is Waiting at
// position 1, or Active if the home shard's active set holds it (the
// step committed it). queue.ErrRoomNotFound when the visitor's shard has no copy
// of the room's state (as Enter).
//
// One call to the visitor's shard; then, under Counter and Timestamp, one
// ZCOUNT per other shard, concurrently; and a call to the home shard for a
// visitor the shard does not know as waiting or admitted, or holds in a
// step's record. The shards are
// read one after another, not at one instant: while a step runs, the sum
// may be off by up to that step's visitors (taken from one shard after
// another's count); between steps it is exact.
//
// A CountersOnly room keeps no waiting visitor: Status knows only the
// admitted (Active) and says Gone otherwise; Claim, with the ticket's
// turn, gives the position.
func (s *Store) Status(ctx context.Context, room, visitor string, now time.Time) (Entry, error) {
	l, err := s.layoutOf(ctx, "status", room)
	if err != nil {
		return Entry{}, err
	}
	i := ShardOf(visitor, l.shards)
	k := l.keys[i]
	r, err := s.exec(ctx, s.status, pick(k, kWait, kMeta, kAdmitted, kTaken, kGuard), []string{visitor, ms(now)}).AsIntSlice()
	if err != nil || len(r) < 4 {
		return Entry{}, unavailable("status", room, fmt.Errorf("reply %v: %v", r, err))
	}
	e := Entry{Visitor: visitor, Shard: i}
	switch r[0] {
	case kindNotFound:
		return Entry{}, s.notFound("status", room)
	case kindAdmitted:
		e.Status, e.ExpiresAt = queue.Active, time.UnixMilli(r[3]).UTC()
		return e, nil
	case kindTaken:
		e.Score = r[1]
		return s.takenStatus(ctx, "status", room, visitor, now, e)
	case kindNone:
		return s.homeStatus(ctx, "status", room, visitor, now, e)
	}
	e.Status, e.Score = queue.Waiting, r[1]
	if l.strategy == Estimate || l.shards == 1 {
		e.Position, e.Estimated = estimate(r[2], l.shards), l.shards > 1
		return e, nil
	}
	// The merge order is (score, shard): a shard before i counts its equal
	// scores as ahead, one after i does not.
	score := strconv.FormatInt(r[1], 10)
	cmds := make(rueidis.Commands, 0, l.shards-1)
	for j := range l.shards {
		if j == i {
			continue
		}
		upTo := "(" + score
		if j < i {
			upTo = score
		}
		cmds = append(cmds, s.c.B().Zcount().Key(l.keys[j][kWait]).Min("-inf").Max(upTo).Build())
	}
	ahead := r[2]
	for _, res := range s.c.DoMulti(ctx, cmds...) {
		n, err := res.AsInt64()
		if err != nil {
			return Entry{}, unavailable("status", room, err)
		}
		ahead += n
	}
	e.Position = ahead + 1
	return e, nil
}

// takenStatus is the entry of a visitor in the record of a step that has
// not acknowledged (enter.lua and status.lua answer "taken"): active if
// the home shard's active set holds it (the step committed it and its ack
// is late or lost: in a room that admits nobody meanwhile, full or
// paused, no pop reclaims the record for the whole slot), else waiting at
// 1 (being admitted). One more call, for these visitors only.
func (s *Store) takenStatus(ctx context.Context, op, room, visitor string, now time.Time, e Entry) (Entry, error) {
	h, err := s.homeStatus(ctx, op, room, visitor, now, Entry{Visitor: e.Visitor, Shard: e.Shard})
	if err != nil || h.Status == queue.Active {
		return h, err
	}
	e.Status, e.Position = queue.Waiting, 1
	return e, nil
}

// homeStatus asks the home shard's active set, the authority, about a
// visitor its shard does not know (its copy of the admitted may lag by a
// step's last call).
func (s *Store) homeStatus(ctx context.Context, op, room, visitor string, now time.Time, e Entry) (Entry, error) {
	exp, err := s.c.Do(ctx, s.c.B().Zscore().Key(s.homeKeys(room)[1]).Member(visitor).Build()).AsInt64()
	switch {
	case rueidis.IsRedisNil(err):
		e.Status = queue.Gone
		return e, nil
	case err != nil:
		return Entry{}, unavailable(op, room, err)
	case exp <= now.UnixMilli():
		e.Status = queue.Gone
		return e, nil
	}
	e.Status, e.ExpiresAt = queue.Active, time.UnixMilli(exp).UTC()
	return e, nil
}

// Leave removes the visitor from its shard's line and from the active set
// (freeing its slot at once): a script on the visitor's shard (lua/leave.lua),
// then a ZREM on the home shard. Leaving twice does nothing the second
// time; queue.ErrRoomNotFound when the visitor's shard has no copy of the
// room's state (as Enter). A visitor taken by a step in flight leaves the
// step's record (the step neither puts it back nor notes it as admitted),
// but is still given a slot by that step's commit if it comes after the
// ZREM. In a CountersOnly room only an
// admitted visitor can leave: a waiting one is a number in no store, and
// its turn is released and lapses like a ghost's.
func (s *Store) Leave(ctx context.Context, room, visitor string) error {
	l, err := s.layoutOf(ctx, "leave", room)
	if err != nil {
		return err
	}
	k := l.keys[ShardOf(visitor, l.shards)]
	r, err := s.exec(ctx, s.leave, pick(k, kWait, kMeta, kAdmitted, kTaken, kGuard), []string{visitor}).AsInt64()
	if err != nil {
		return unavailable("leave", room, err)
	}
	if r < 0 {
		return s.notFound("leave", room)
	}
	if err := s.c.Do(ctx, s.c.B().Zrem().Key(s.homeKeys(room)[1]).Member(visitor).Build()).Error(); err != nil {
		return unavailable("leave", room, err)
	}
	return nil
}

// SetLineState writes the room's state (queue.RoomState) and its version
// (the home hash's state_v, which every update of the room moves on) to
// line shards 1 to shards-1, where enter.lua reads it; shard 0 shares the
// home meta hash, which holds the state already (reserve.lua and
// commit.lua read it there). A copy is written only if its version is
// newer than the copy's (line_state.lua): of two updates whose copies
// cross, the later one's state stays. The writes go out together, not
// atomically: an Enter on a shard not yet written follows the old state,
// and a shard without a copy answers that the room does not exist, until
// the next SetLineState or SyncLines (redisqueue's Stats) writes it.
//
// shards and strategy are the room's, as its home hash holds them now:
// the store takes them as the room's layout (see SyncLines).
func (s *Store) SetLineState(ctx context.Context, room string, shards int, strategy Strategy, tags, state, version string) error {
	_, err := s.SyncLines(ctx, room, shards, strategy, tags, state, version)
	if err != nil {
		return fmt.Errorf("redisshard: set line state %s: %w", room, err)
	}
	return nil
}

// SyncLines is SetLineState that also counts the visitors in the room's
// lines (Waiting), in one call per shard: redisqueue's Stats runs it, so
// that a copy left behind (an update that stopped between its two calls,
// a shard's primary that failed over to an empty replica) is repaired at
// the next refresh.
//
// It also takes shards, strategy and tags, read from the room's home hash with
// state and version, as the room's layout, in place of what the store
// remembers: a room Redis lost and that was made again with another
// layout (through this instance or another) is then found where it is
// from the next refresh on, each scheduler step on every instance.
func (s *Store) SyncLines(ctx context.Context, room string, shards int, strategy Strategy, tags, state, version string) (int64, error) {
	l := s.remember(room, shards, strategy, tags)
	counts := make([]int64, shards)
	errs := make([]error, shards)
	each(shards, func(i int) {
		k := l.keys[i]
		if i == 0 {
			counts[i], errs[i] = s.c.Do(ctx, s.c.B().Zcard().Key(k[kWait]).Build()).AsInt64()
			return
		}
		counts[i], errs[i] = s.exec(ctx, s.lineState, pick(k, kMeta, kWait, kGuard), []string{state, version}).AsInt64()
	})
	if err := errors.Join(errs...); err != nil {
		return 0, unavailable("sync lines", room, err)
	}
	var n int64
	for _, c := range counts {
		n += c
	}
	return n, nil
}

// next is the next number of the counter field in the meta hash keys[0]
// (keys[1] is its slot's guard), if the room exists there (seq.lua).
func (s *Store) next(ctx context.Context, op, room string, keys []string, field string) (int64, error) {
	n, err := s.exec(ctx, s.seq, keys, []string{field}).AsInt64()
	if err != nil {
		return 0, unavailable(op, room, err)
	}
	if n < 0 {
		return 0, s.notFound(op, room)
	}
	return n, nil
}
