package redisshard

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// This file lends crash_test.go, in package redisshard_test (it imports
// testenv, which imports redisqueue, which imports this package), the
// phases of an admission step to run by hand.

// CrashStep runs a step's reserve and pops (and its commit when commit is
// set) at now with a lease of 5 s, and returns the slots it reserved and
// the visitors it took, sorted.
func (s *Store) CrashStep(ctx context.Context, room string, l Settings, id string, now time.Time, commit bool) (int64, []string, error) {
	r, err := s.exec(ctx, s.reserve, s.homeKeys(room), []string{ms(now), id, "5000"}).AsIntSlice()
	if err != nil {
		return 0, nil, err
	}
	plan, err := s.plan(ctx, room, s.remember(room, l.Shards, l.Strategy, l.Tags), r[0], int(r[1]), now)
	if err != nil {
		return r[0], nil, err
	}
	var taken []string
	end := strconv.FormatInt(now.Add(5*time.Second).UnixMilli(), 10)
	for i := range l.Shards {
		keys := s.lineKeys(room, i)
		arr, err := s.exec(ctx, s.pop, pick(keys, kWait, kMeta, kLeases, kTaken, kGuard),
			[]string{ms(now), id, end, strconv.FormatInt(plan[i].n, 10), plan[i].max}).AsStrSlice()
		if err != nil {
			return r[0], nil, err
		}
		for j := 0; j < len(arr); j += 2 {
			taken = append(taken, arr[j])
		}
	}
	slices.Sort(taken)
	if commit {
		if err := s.exec(ctx, s.commit, s.homeKeys(room), append([]string{ms(now), id}, taken...)).Error(); err != nil {
			return r[0], taken, err
		}
	}
	return r[0], taken, nil
}

// ActiveKey is the room's active set on its home shard.
func (s *Store) ActiveKey(room string) string { return s.homeKeys(room)[1] }

// HomeMetaKey is the room's home meta hash (its settings and state).
func (s *Store) HomeMetaKey(room string) string { return s.homeKeys(room)[0] }

// WaitKey and ShardMetaKey are line shard i's sorted set and meta hash.
func (s *Store) WaitKey(room string, i int) string { return s.lineKeys(room, i)[kWait] }

func (s *Store) ShardMetaKey(room string, i int) string { return s.lineKeys(room, i)[kMeta] }

// Step is an admission step run phase by phase (Admit's take, commitStep
// and ackStep), so that a test can put a call between two phases.
type Step struct {
	s    *Store
	room string
	l    layout
	st   *step
	now  time.Time
}

// TakeStep runs a step's reserve, peek and pops at now.
func (s *Store) TakeStep(ctx context.Context, room string, now time.Time) (*Step, error) {
	l, err := s.layoutOf(ctx, "admit", room)
	if err != nil {
		return nil, err
	}
	st, err := s.take(ctx, room, l, now)
	return &Step{s: s, room: room, l: l, st: st, now: now}, err
}

// Taken lists the visitors the step took, in admission order.
func (p *Step) Taken() []string {
	var out []string
	for _, q := range p.st.order {
		out = append(out, q.visitor)
	}
	return out
}

// Commit runs the step's commit.
func (p *Step) Commit(ctx context.Context) (AdmitResult, error) {
	err := p.s.commitStep(ctx, p.room, p.st, p.now)
	return p.st.res, err
}

// Ack runs the step's acknowledgements.
func (p *Step) Ack(ctx context.Context) error {
	return p.s.ackStep(ctx, p.room, p.l, p.st, p.now)
}

// Prefix is the store's key prefix.
func (s *Store) Prefix() string { return s.prefix }

// Finish runs the step's commit and acknowledgements as Admit does.
func (p *Step) Finish(ctx context.Context) (AdmitResult, error) {
	return p.s.finish(ctx, p.room, p.l, p.st, p.now)
}

// Waiting counts the visitors in the room's lines, the shards read one
// after another (as Status's count; visitors taken by a step in flight
// are not counted).
func (s *Store) Waiting(ctx context.Context, room string, shards int) (int64, error) {
	cmds := make(rueidis.Commands, 0, shards)
	for i := range shards {
		cmds = append(cmds, s.c.B().Zcard().Key(s.lineKeys(room, i)[0]).Build())
	}
	var n int64
	for _, r := range s.c.DoMulti(ctx, cmds...) {
		c, err := r.AsInt64()
		if err != nil {
			return 0, unavailable("waiting", room, err)
		}
		n += c
	}
	return n, nil
}

// lineKeys are line shard i's keys in the layout s holds for room, or
// with the shard number as its tag's name.
func (s *Store) lineKeys(room string, i int) []string {
	if v, ok := s.rooms.Load(room); ok && i < v.(layout).shards {
		return v.(layout).keys[i]
	}
	return s.shardKeys(room, tagNames("", i+1)[i])
}
