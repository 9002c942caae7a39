package redisshard_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/fault"
	"usher/internal/queue"
	"usher/internal/queue/redisshard"
	"usher/internal/testenv"
)

// lines are the strategies that keep a line of visitors (not CountersOnly).
var lines = []redisshard.Strategy{redisshard.Counter, redisshard.Timestamp, redisshard.Estimate}

// backends runs f on the Redis of USHER_TEST_REDIS (hash tags work there
// too, all on one server) and on the cluster of USHER_TEST_REDIS_CLUSTER
// (scripts/cluster.sh: the shards' tags spread over three primaries), each
// with a fresh prefix.
func backends(t *testing.T, f func(t *testing.T, c rueidis.Client, s *redisshard.Store)) {
	for _, b := range []struct{ name, env string }{
		{"redis", "USHER_TEST_REDIS"},
		{"cluster", "USHER_TEST_REDIS_CLUSTER"},
	} {
		t.Run(b.name, func(t *testing.T) {
			c := testenv.RedisAt(t, b.env)
			f(t, c, redisshard.New(c, testenv.RedisPrefix(t, c), 0))
		})
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		change func(*redisshard.Settings)
		field  string
	}{
		{func(s *redisshard.Settings) { s.Shards = 0 }, "shards"},
		{func(s *redisshard.Settings) { s.Shards = redisshard.MaxShards + 1 }, "shards"},
		{func(s *redisshard.Settings) { s.Strategy = "round-robin" }, "shard_strategy"},
		{func(s *redisshard.Settings) { s.Strategy = "" }, "shard_strategy"},
		{func(s *redisshard.Settings) { s.MaxActive = 0 }, "max_active"},
		{func(s *redisshard.Settings) { s.AdmitRate = 0 }, "admit_rate"},
		{func(s *redisshard.Settings) { s.Interval = 0 }, "interval"},
		{func(s *redisshard.Settings) { s.ActiveTTL = 0 }, "active_ttl"},
		{func(s *redisshard.Settings) { s.ClaimWindow = 0 }, "claim_window"},
		{func(s *redisshard.Settings) { s.ClaimWindow = time.Hour }, "claim_window"},
	} {
		set := redisshard.DefaultSettings()
		tc.change(&set)
		err := set.Validate()
		if !errors.Is(err, queue.ErrInvalid) || !strings.HasPrefix(fault.Message(err), tc.field+":") {
			t.Errorf("Validate(%+v) = %v, want queue.ErrInvalid naming %s", set, err, tc.field)
		}
	}
	for _, st := range redisshard.Strategies {
		set := redisshard.DefaultSettings()
		set.Shards, set.Strategy = redisshard.MaxShards, st
		if err := set.Validate(); err != nil {
			t.Errorf("Validate(%s, %d shards) = %v, want nil", st, set.Shards, err)
		}
	}
}

func TestPutRoom(t *testing.T) {
	backends(t, func(t *testing.T, c rueidis.Client, s *redisshard.Store) {
		ctx := context.Background()
		set := redisshard.DefaultSettings()
		set.Shards, set.Strategy = 4, redisshard.Timestamp
		if err := s.PutRoom(ctx, "hot", set); err != nil {
			t.Fatal(err)
		}
		set.MaxActive = 7
		if err := s.PutRoom(ctx, "hot", set); err != nil {
			t.Fatal(err)
		}
		got, err := s.Settings(ctx, "hot")
		set.Tags = got.Tags // chosen at creation: a cluster's, none on one server
		if err != nil || got != set {
			t.Errorf("Settings = %+v, %v; want %+v", got, err, set)
		}
		for _, change := range []func(*redisshard.Settings){
			func(s *redisshard.Settings) { s.Shards = 5 },
			func(s *redisshard.Settings) { s.Strategy = redisshard.Counter },
			func(s *redisshard.Settings) { s.Tags = "9,8,7" },
		} {
			bad := set
			change(&bad)
			if err := s.PutRoom(ctx, "hot", bad); !errors.Is(err, queue.ErrInvalid) {
				t.Errorf("PutRoom changing the layout to %d %s %q = %v, want queue.ErrInvalid", bad.Shards, bad.Strategy, bad.Tags, err)
			}
		}
		if _, _, err := s.Enter(ctx, "missing", "a", time.Now()); !errors.Is(err, queue.ErrRoomNotFound) {
			t.Errorf("Enter into a missing room = %v, want queue.ErrRoomNotFound", err)
		}
		if _, err := s.Admit(ctx, "missing", time.Now()); !errors.Is(err, queue.ErrRoomNotFound) {
			t.Errorf("Admit of a missing room = %v, want queue.ErrRoomNotFound", err)
		}
	})
}

// room creates a room of k shards under strategy st that admits up to
// maxActive at rate per second, in steps of 100 ms.
func room(t *testing.T, s *redisshard.Store, name string, st redisshard.Strategy, k int, maxActive int64, rate float64) {
	t.Helper()
	set := redisshard.Settings{Shards: k, Strategy: st, MaxActive: maxActive, AdmitRate: rate,
		Interval: 100 * time.Millisecond, ActiveTTL: time.Hour, ClaimWindow: time.Minute}
	if err := s.PutRoom(context.Background(), name, set); err != nil {
		t.Fatal(err)
	}
}

// TestLine enters visitors one after another (1 ms apart), then checks,
// per strategy with one and with five shards: enter is idempotent; Status
// gives exact positions (counter, timestamp, one shard) or the estimate;
// admission takes every shard's line in its order (FIFO within a shard),
// and, for counter and timestamp, the room's in arrival order.
func TestLine(t *testing.T) {
	backends(t, func(t *testing.T, c rueidis.Client, s *redisshard.Store) {
		ctx := context.Background()
		t0 := time.UnixMilli(1_800_000_000_000)
		for _, st := range lines {
			for _, k := range []int{1, 5} {
				name := fmt.Sprintf("line-%s-%d", st, k)
				t.Run(name, func(t *testing.T) {
					room(t, s, name, st, k, 1000, 1000)
					const n = 80
					var first []redisshard.Entry
					for i := range n {
						e, created, err := s.Enter(ctx, name, fmt.Sprintf("v%02d", i), t0.Add(time.Duration(i)*time.Millisecond))
						if err != nil || !created || e.Status != queue.Waiting {
							t.Fatalf("Enter v%02d = %+v, %v, %v; want a new waiting entry", i, e, created, err)
						}
						first = append(first, e)
					}
					for i := range n {
						e, created, err := s.Enter(ctx, name, fmt.Sprintf("v%02d", i), t0.Add(time.Hour))
						if err != nil || created || e.Score != first[i].Score || e.Shard != first[i].Shard {
							t.Errorf("Enter v%02d again = %+v, %v, %v; want the same place %+v, not created", i, e, created, err, first[i])
						}
					}
					rankInShard := map[int]int64{}
					for i := range n {
						e, err := s.Status(ctx, name, fmt.Sprintf("v%02d", i), t0.Add(time.Second))
						if err != nil {
							t.Fatal(err)
						}
						want, estimated := int64(i+1), false
						if st == redisshard.Estimate && k > 1 {
							want, estimated = rankInShard[e.Shard]*int64(k)+int64(k+1)/2, true
						}
						rankInShard[e.Shard]++
						if e.Status != queue.Waiting || e.Position != want || e.Estimated != estimated {
							t.Errorf("Status v%02d = %+v, want waiting at %d (estimated %v)", i, e, want, estimated)
						}
					}
					if e, err := s.Status(ctx, name, "stranger", t0); err != nil || e.Status != queue.Gone {
						t.Errorf("Status of a stranger = %+v, %v; want gone", e, err)
					}

					var order []string
					for step := 0; len(order) < n && step < 100; step++ {
						r, err := s.Admit(ctx, name, t0.Add(time.Second+time.Duration(step)*100*time.Millisecond))
						if err != nil {
							t.Fatal(err)
						}
						order = append(order, r.Admitted...)
					}
					if len(order) != n {
						t.Fatalf("admitted %d, want %d", len(order), n)
					}
					perShard := map[int][]string{}
					for _, v := range order {
						i := redisshard.ShardOf(v, k)
						perShard[i] = append(perShard[i], v)
					}
					for i, vs := range perShard {
						if !slices.IsSorted(vs) {
							t.Errorf("shard %d admitted %v, want its arrival order", i, vs)
						}
					}
					if st != redisshard.Estimate && !slices.IsSorted(order) {
						t.Errorf("admitted %v, want the arrival order", order)
					}
					for _, v := range []string{"v00", "v79"} {
						e, created, err := s.Enter(ctx, name, v, t0.Add(2*time.Minute))
						if err != nil || created || e.Status != queue.Active {
							t.Errorf("Enter %s after its admission = %+v, %v, %v; want active, not created", v, e, created, err)
						}
						if e, err := s.Status(ctx, name, v, t0.Add(2*time.Minute)); err != nil || e.Status != queue.Active {
							t.Errorf("Status %s after its admission = %+v, %v; want active", v, e, err)
						}
						if err := s.Leave(ctx, name, v); err != nil {
							t.Fatal(err)
						}
						if e, err := s.Status(ctx, name, v, t0.Add(2*time.Minute)); err != nil || e.Status != queue.Gone {
							t.Errorf("Status %s after leaving = %+v, %v; want gone", v, e, err)
						}
					}
				})
			}
		}
	})
}

// TestCapAndRate runs 8 schedulers and 16 entrants at once on one room per
// strategy (6 shards) and checks that the room as a whole never admits
// more than max_active at once, nor more than admit_rate allows since the
// first step, and that no visitor is admitted twice. The clock is
// simulated: each step's now is the next millisecond, so the bound does
// not depend on how fast the machine runs.
func TestCapAndRate(t *testing.T) {
	backends(t, func(t *testing.T, c rueidis.Client, s *redisshard.Store) {
		ctx := context.Background()
		t0 := time.UnixMilli(1_800_000_000_000)
		for _, st := range lines {
			t.Run(string(st), func(t *testing.T) {
				t.Run("cap", func(t *testing.T) {
					name := "cap-" + string(st)
					const maxActive = 50
					room(t, s, name, st, 6, maxActive, 100_000)
					admitted := run(t, s, name, t0, 600, 400, 0)
					if len(admitted) != maxActive {
						t.Errorf("admitted %d with nobody leaving, want max_active %d", len(admitted), maxActive)
					}
					// Twenty leave: twenty more, and no more, are admitted.
					for _, v := range admitted[:20] {
						if err := s.Leave(ctx, name, v); err != nil {
							t.Fatal(err)
						}
					}
					again := run(t, s, name, t0.Add(time.Minute), 0, 400, 0)
					if len(again) != 20 {
						t.Errorf("admitted %d after 20 left, want 20", len(again))
					}
					if n := activeCount(t, c, s, name); n != maxActive {
						t.Errorf("active set holds %d, want %d", n, maxActive)
					}
				})
				t.Run("rate", func(t *testing.T) {
					name := "rate-" + string(st)
					const rate, steps = 200, 2000 // 2 s of simulated time
					room(t, s, name, st, 6, 1_000_000, rate)
					admitted := run(t, s, name, t0, 600, steps, 400)
					// The bucket starts with a batch (rate × 100 ms) and
					// refills at rate over the steps' (steps-1) ms.
					limit := 20 + int(rate*(steps-1)/1000)
					if len(admitted) > limit || len(admitted) < limit/2 {
						t.Errorf("admitted %d over %d ms, want at most %d (and at least half of it)", len(admitted), steps-1, limit)
					}
				})
			})
		}
	})
}

// run enters pre visitors, then runs steps admission steps from 8
// schedulers (step i at t0 + i ms) while 16 goroutines enter more
// visitors (during of them), and returns the admitted, checking no one
// was admitted twice.
func run(t *testing.T, s *redisshard.Store, name string, t0 time.Time, pre, steps, during int) []string {
	t.Helper()
	ctx := context.Background()
	base := fmt.Sprintf("%d-", t0.UnixMilli())
	for i := range pre {
		if _, _, err := s.Enter(ctx, name, fmt.Sprintf("%sp%04d", base, i), t0); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var admitted []string
	var wg sync.WaitGroup
	wg.Go(func() { // entrants, while the schedulers step
		fanOut(t, 16, during, func(_, i int) error {
			_, _, err := s.Enter(ctx, name, fmt.Sprintf("%sd%04d", base, i), t0)
			return err
		})
	})
	fanOut(t, 8, steps, func(_, i int) error {
		r, err := s.Admit(ctx, name, t0.Add(time.Duration(i)*time.Millisecond))
		if err != nil {
			return err
		}
		mu.Lock()
		admitted = append(admitted, r.Admitted...)
		mu.Unlock()
		return nil
	})
	wg.Wait()
	seen := map[string]bool{}
	for _, v := range admitted {
		if seen[v] {
			t.Errorf("%s admitted twice", v)
		}
		seen[v] = true
	}
	return admitted
}

// activeCount reads the size of the room's active set, the home shard's
// authority on slots.
func activeCount(t *testing.T, c rueidis.Client, s *redisshard.Store, name string) int64 {
	t.Helper()
	n, err := c.Do(context.Background(), c.B().Zcard().Key(s.ActiveKey(name)).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestKeys pins the key layout on the cluster of USHER_TEST_REDIS_CLUSTER:
// each shard's keys share one slot (one hash tag), shard 0 shares the home
// shard's, twelve shards land on more than one primary, and the waiting
// visitors are the members of the shards' lines.
func TestKeys(t *testing.T) {
	c := testenv.RedisAt(t, "USHER_TEST_REDIS_CLUSTER")
	ctx := context.Background()
	s := redisshard.New(c, testenv.RedisPrefix(t, c), 0)
	const k = 12
	room(t, s, "keys", redisshard.Timestamp, k, 10, 10)
	for i := range 120 {
		if _, _, err := s.Enter(ctx, "keys", fmt.Sprintf("v%03d", i), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	slot := func(key string) int64 {
		n, err := c.Do(ctx, c.B().ClusterKeyslot().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	keys := s.Keys("keys", k)
	home := slot(keys[0])
	for _, key := range keys[1:4] {
		if slot(key) != home {
			t.Errorf("home key %s in slot %d, the home meta in %d", key, slot(key), home)
		}
	}
	slots := map[int64]int{}
	members := int64(0)
	for i := range k {
		shard := keys[4+6*i : 10+6*i]
		first := slot(shard[0])
		for _, key := range shard[1:] {
			if slot(key) != first {
				t.Errorf("shard %d: key %s in slot %d, its line in %d", i, key, slot(key), first)
			}
		}
		if i == 0 && first != home {
			t.Errorf("shard 0 in slot %d, want the home slot %d", first, home)
		}
		slots[first] = i // two tags may share a slot (CRC16), rarely
		n, err := c.Do(ctx, c.B().Zcard().Key(shard[0]).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		members += n
	}
	if members != 120 {
		t.Errorf("the shards' lines hold %d members, want the 120 entered", members)
	}
	owners := map[string]bool{}
	for sl := range slots {
		addr, err := testenv.SlotOwner(ctx, c, int(sl))
		if err != nil {
			t.Fatal(err)
		}
		owners[addr] = true
	}
	// Twelve tags all on one of three primaries: probability 3·(1/3)^12 ≈ 6·10⁻⁶.
	if len(owners) < 2 {
		t.Errorf("twelve shards landed on primaries %v, want more than one", owners)
	}
}

// fanOut calls f(g, i) for every i in [0, n) from workers goroutines (g is
// the goroutine's number) and returns how long they took; the first error
// stops its goroutine and fails tb.
func fanOut(tb testing.TB, workers, n int, f func(g, i int) error) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for g := range workers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if err := f(g, int(i)); err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}
