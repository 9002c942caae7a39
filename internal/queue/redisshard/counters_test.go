package redisshard_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/queue"
	"usher/internal/queue/redisshard"
)

// TestCountersOnly checks the counters-only room with one shard and with
// three: nothing is stored for a waiting visitor; its position is its
// number minus the head (exact with one shard); a step releases turns up
// to the cap; a released turn holds its slot until claimed or until the
// claim window passes (a ghost's turn), then it is gone and the slot
// goes to the next turn; a batch is never claimed by more visitors than it
// has turns.
func TestCountersOnly(t *testing.T) {
	backends(t, func(t *testing.T, c rueidis.Client, s *redisshard.Store) {
		ctx := context.Background()
		t0 := time.UnixMilli(1_800_000_000_000)
		for _, k := range []int{1, 3} {
			t.Run(fmt.Sprint(k), func(t *testing.T) {
				name := fmt.Sprintf("counters-%d", k)
				set := redisshard.Settings{Shards: k, Strategy: redisshard.CountersOnly, MaxActive: 5, AdmitRate: 1000,
					Interval: 100 * time.Millisecond, ActiveTTL: time.Hour, ClaimWindow: time.Minute}
				if err := s.PutRoom(ctx, name, set); err != nil {
					t.Fatal(err)
				}
				tickets := map[string]redisshard.Entry{}
				for i := range 30 {
					v := fmt.Sprintf("v%02d", i)
					e, created, err := s.Enter(ctx, name, v, t0)
					if err != nil || !created || e.Status != queue.Waiting {
						t.Fatalf("Enter %s = %+v, %v, %v", v, e, created, err)
					}
					tickets[v] = e
				}
				for _, key := range s.Keys(name, k) {
					n, err := c.Do(ctx, c.B().Type().Key(key).Build()).ToString()
					if err != nil || (n != "none" && n != "hash") {
						t.Errorf("key %s is a %s (%v): a waiting visitor should cost nothing but counters", key, n, err)
					}
				}
				claim := func(v string, at time.Time) redisshard.Entry {
					t.Helper()
					e, err := s.Claim(ctx, name, v, tickets[v].Shard, tickets[v].Score, at)
					if err != nil {
						t.Fatal(err)
					}
					return e
				}
				if k == 1 {
					for i, v := range []string{"v00", "v07", "v29"} {
						want := []int64{1, 8, 30}[i]
						if e := claim(v, t0); e.Status != queue.Waiting || e.Position != want || e.Estimated {
							t.Errorf("Claim %s before any admission = %+v, want waiting at exactly %d", v, e, want)
						}
					}
				}
				r, err := s.Admit(ctx, name, t0)
				if err != nil || r.Reserved != 5 || len(r.Admitted) != 0 {
					t.Fatalf("Admit = %+v, %v; want 5 turns released, no visitor named", r, err)
				}
				released := map[string]bool{}
				for _, tr := range r.Turns {
					for v, e := range tickets {
						if e.Shard == tr.Shard && e.Score >= tr.First && e.Score <= tr.Last {
							released[v] = true
						}
					}
				}
				if len(released) != 5 {
					t.Fatalf("turns %+v cover %d tickets, want 5", r.Turns, len(released))
				}
				// One claims; four are ghosts.
				var claimer string
				for v := range released {
					claimer = v
					break
				}
				for range 2 {
					if e := claim(claimer, t0.Add(time.Second)); e.Status != queue.Active {
						t.Errorf("Claim %s after its release = %+v, want active", claimer, e)
					}
				}
				if r, err := s.Admit(ctx, name, t0.Add(2*time.Second)); err != nil || r.Reserved != 0 {
					t.Errorf("Admit while the ghosts' turns hold their slots = %+v, %v; want nothing released", r, err)
				}
				r, err = s.Admit(ctx, name, t0.Add(time.Minute+time.Second))
				if err != nil || r.Reserved != 4 {
					t.Errorf("Admit after the claim window = %+v, %v; want 4 released (the ghosts' slots)", r, err)
				}
				for v := range released {
					if e := claim(v, t0.Add(time.Minute+2*time.Second)); v != claimer && e.Status != queue.Gone {
						t.Errorf("Claim %s after its claim window = %+v, want gone", v, e)
					}
				}
				// Every ticket of the new batch, claimed by 6 visitors:
				// no more claims than turns.
				tr := r.Turns[0]
				active := 0
				for i := range 6 {
					e, err := s.Claim(ctx, name, fmt.Sprintf("copy%d", i), tr.Shard, tr.First, t0.Add(time.Minute+3*time.Second))
					if err != nil {
						t.Fatal(err)
					}
					if e.Status == queue.Active {
						active++
					}
				}
				if want := int(tr.Last - tr.First + 1); active != want {
					t.Errorf("6 claims of one turn of a batch of %d: %d active, want %d", want, active, want)
				}
				if e, err := s.Status(ctx, name, claimer, t0.Add(time.Minute)); err != nil || e.Status != queue.Active {
					t.Errorf("Status of a claimer = %+v, %v; want active", e, err)
				}
			})
		}
	})
}

// TestCountersOnlyCapAndRate runs 8 schedulers on a counters-only room of
// three shards while 16 goroutines claim every released turn, and checks
// the cap (max_active claimed and pending turns, however many steps run at
// once) and the rate (at most a batch plus admit_rate × the simulated
// time released).
func TestCountersOnlyCapAndRate(t *testing.T) {
	backends(t, func(t *testing.T, c rueidis.Client, s *redisshard.Store) {
		ctx := context.Background()
		t0 := time.UnixMilli(1_800_000_000_000)
		for _, tc := range []struct {
			name          string
			maxActive     int64
			rate          float64
			steps, atMost int
		}{
			{"cap", 50, 100_000, 400, 50},
			{"rate", 1_000_000, 200, 2000, 20 + 399}, // a batch (rate × 100 ms), then 1,999 ms at rate
		} {
			t.Run(tc.name, func(t *testing.T) {
				name := "counters-" + tc.name
				set := redisshard.Settings{Shards: 3, Strategy: redisshard.CountersOnly, MaxActive: tc.maxActive,
					AdmitRate: tc.rate, Interval: 100 * time.Millisecond, ActiveTTL: time.Hour, ClaimWindow: time.Minute}
				if err := s.PutRoom(ctx, name, set); err != nil {
					t.Fatal(err)
				}
				holders := map[[2]int64]string{} // (shard, turn) → visitor
				for i := range 1000 {
					v := fmt.Sprintf("v%04d", i)
					e, _, err := s.Enter(ctx, name, v, t0)
					if err != nil {
						t.Fatal(err)
					}
					holders[[2]int64{int64(e.Shard), e.Score}] = v
				}
				released := make(chan [2]int64, 1000)
				var (
					wg, claimers sync.WaitGroup
					step         atomic.Int64
					total        atomic.Int64
					active       atomic.Int64
				)
				for range 8 {
					wg.Go(func() {
						for i := step.Add(1) - 1; i < int64(tc.steps); i = step.Add(1) - 1 {
							r, err := s.Admit(ctx, name, t0.Add(time.Duration(i)*time.Millisecond))
							if err != nil {
								t.Error(err)
								return
							}
							total.Add(r.Reserved)
							for _, tr := range r.Turns {
								for n := tr.First; n <= tr.Last; n++ {
									released <- [2]int64{int64(tr.Shard), n}
								}
							}
						}
					})
				}
				for range 16 {
					claimers.Go(func() {
						for turn := range released {
							e, err := s.Claim(ctx, name, holders[turn], int(turn[0]), turn[1], t0.Add(time.Duration(tc.steps)*time.Millisecond))
							if err != nil {
								t.Error(err)
								return
							}
							if e.Status == queue.Active {
								active.Add(1)
							}
						}
					})
				}
				wg.Wait()
				close(released)
				claimers.Wait()
				if got := int(total.Load()); got > tc.atMost || got < tc.atMost/2 {
					t.Errorf("released %d turns, want at most %d (and at least half)", got, tc.atMost)
				}
				if active.Load() != total.Load() {
					t.Errorf("%d of %d released turns claimed, want all", active.Load(), total.Load())
				}
			})
		}
	})
}
