package redisshard

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/queue"
)

// Turns is a range of turns of one shard that an admission step of a
// CountersOnly room released: the visitors whose tickets carry these
// numbers may claim a slot (Claim) within the room's ClaimWindow.
type Turns struct {
	Shard       int
	First, Last int64
}

// countersKeys are the home keys of a CountersOnly room: meta, active,
// turns, turn_ends and the guard (release.lua, claim.lua).
func (s *Store) countersKeys(room string) []string {
	t := s.homeTag(room)
	return []string{t + "meta", t + "active", t + "turns", t + "turn_ends", t + "guard"}
}

// enterCounters takes the next number of the visitor's shard: one
// HINCRBY (in seq.lua, which checks that the room exists), and nothing
// stored for the visitor. Each call is a new turn: the ticket
// that carries it is what makes a visitor's entry idempotent, so a caller
// must not call Enter for a visitor that holds a ticket of the room.
func (s *Store) enterCounters(ctx context.Context, room, visitor string, l layout) (Entry, bool, error) {
	i := ShardOf(visitor, l.shards)
	n, err := s.next(ctx, "enter", room, pick(l.keys[i], kMeta, kGuard), "lseq")
	if err != nil {
		return Entry{}, false, err
	}
	return Entry{Visitor: visitor, Status: queue.Waiting, Shard: i, Score: n, Estimated: true}, true, nil
}

// Claim is a CountersOnly room's poll with a ticket: the visitor and the
// turn (shard, number) Enter gave it. Waiting with its position (the
// number minus the shard's head: exact with one shard, × the shards as an
// estimate with several) until its turn is released; then Active, taking
// a slot the release held for it; Gone once the turn's claim window has
// passed unclaimed. A turn claimed by more visitors than its batch has
// turns (a copied ticket) is Gone to the extra ones, so the cap holds;
// binding a ticket to its visitor is the ticket's signature's job.
// One call, to the home shard.
func (s *Store) Claim(ctx context.Context, room, visitor string, shard int, seq int64, now time.Time) (Entry, error) {
	l, err := s.layoutOf(ctx, "claim", room)
	if err != nil {
		return Entry{}, err
	}
	if l.strategy != CountersOnly || shard < 0 || shard >= l.shards {
		return Entry{}, fmt.Errorf("redisshard: claim %s: %w", room, queue.ErrInvalid.Detail("claim: not a counters-only room, or no such shard"))
	}
	r, err := s.exec(ctx, s.claim, s.countersKeys(room),
		[]string{visitor, ms(now), strconv.Itoa(shard), strconv.FormatInt(seq, 10)}).AsIntSlice()
	if err != nil || len(r) < 3 {
		return Entry{}, unavailable("claim", room, fmt.Errorf("reply %v: %v", r, err))
	}
	e := Entry{Visitor: visitor, Shard: shard}
	switch r[0] {
	case 0:
		return Entry{}, s.notFound("claim", room)
	case kindWaiting:
		e.Status, e.Score = queue.Waiting, seq
		e.Position, e.Estimated = estimate(r[1]-1, l.shards), l.shards > 1
	case kindAdmitted:
		e.Status, e.ExpiresAt = queue.Active, time.UnixMilli(r[2]).UTC()
	default:
		e.Status = queue.Gone
	}
	return e, nil
}

// releaseTurns is Admit for a CountersOnly room: read the shards' counters
// (concurrently), then release.lua on the home shard.
func (s *Store) releaseTurns(ctx context.Context, room string, l layout, now time.Time) (AdmitResult, error) {
	cmds := make(rueidis.Commands, l.shards)
	for i := range cmds {
		cmds[i] = s.c.B().Hget().Key(l.keys[i][kMeta]).Field("lseq").Build()
	}
	args := make([]string, 0, 1+l.shards)
	args = append(args, ms(now))
	for _, res := range s.c.DoMulti(ctx, cmds...) {
		n, err := res.AsInt64()
		if rueidis.IsRedisNil(err) {
			n, err = 0, nil
		}
		if err != nil {
			return AdmitResult{}, unavailable("admit: counters", room, err)
		}
		args = append(args, strconv.FormatInt(n, 10))
	}
	r, err := s.exec(ctx, s.release, s.countersKeys(room), args).AsIntSlice()
	if err != nil || len(r) < 1 {
		return AdmitResult{}, unavailable("admit: release", room, fmt.Errorf("reply %v: %v", r, err))
	}
	if r[0] < 0 {
		return AdmitResult{}, s.notFound("admit", room)
	}
	res := AdmitResult{Reserved: r[0]}
	for i := 1; i+2 < len(r); i += 3 {
		res.Turns = append(res.Turns, Turns{Shard: int(r[i]), First: r[i+1], Last: r[i+2]})
	}
	return res, nil
}
