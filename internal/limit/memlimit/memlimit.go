// Package memlimit is the limit.Store in memory, for one instance: its
// counts are lost on restart and not shared between instances.
//
// Keys live in 64 shards, each under its own mutex. A shard forgets its
// quiet keys (those whose theoretical arrival time has passed) when it has
// grown to twice its size after the last sweep, so memory stays
// proportional to the clients seen in the last period, and the cost of a
// sweep is amortised over the calls that grew the shard.
package memlimit

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"usher/internal/limit"
)

var _ limit.Store = (*Store)(nil)

const shards = 64

// Store is a limit.Store in memory. Its zero value is not usable; use New.
type Store struct {
	seed   maphash.Seed
	shards [shards]shard
}

type shard struct {
	mu    sync.Mutex
	tat   map[string]int64 // unix nanoseconds
	sweep int              // size at which the next sweep runs
}

// New returns an empty store.
func New() *Store {
	s := &Store{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].tat = make(map[string]int64)
		s.shards[i].sweep = 1024
	}
	return s
}

// Allow implements limit.Store.
func (s *Store) Allow(_ context.Context, key string, r limit.Rate, now time.Time) (bool, time.Duration, error) {
	if err := limit.Check(key, r); err != nil {
		return false, 0, err
	}
	sh := &s.shards[maphash.String(s.seed, key)%shards]
	n := now.UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ok, next, retry := limit.Decide(sh.tat[key], n, int64(r.Interval()), r.Events)
	if !ok {
		return false, time.Duration(retry), nil
	}
	sh.tat[key] = next
	if len(sh.tat) >= sh.sweep {
		for k, t := range sh.tat {
			if t <= n {
				delete(sh.tat, k)
			}
		}
		sh.sweep = max(1024, 2*len(sh.tat))
	}
	return true, 0, nil
}

// Len returns the number of keys the store remembers (tests, metrics).
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.tat)
		sh.mu.Unlock()
	}
	return n
}
