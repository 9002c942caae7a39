package redisshard

import (
	"context"
	"slices"
	"strconv"
	"time"
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
	plan, err := s.plan(ctx, room, layout{l.Shards, l.Strategy}, r[0], int(r[1]), now)
	if err != nil {
		return r[0], nil, err
	}
	var taken []string
	end := strconv.FormatInt(now.Add(5*time.Second).UnixMilli(), 10)
	for i := range l.Shards {
		keys := s.shardKeys(room, i)
		arr, err := s.exec(ctx, s.pop, []string{keys[0], keys[1], keys[2], keys[4]},
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
