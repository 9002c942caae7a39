package redisshard_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/queue"
	"usher/internal/queue/redisshard"
	"usher/internal/testenv"
)

// BenchmarkLine measures one hot room per strategy, unsharded and over
// USHER_BENCH_SHARDS shards (default 3), on the Redis or cluster of
// USHER_BENCH_SHARD_URL (scripts/bench-shard.sh runs it on a one- and a
// three-primary cluster; docs/benchmarks.md#one-hot-room-over-several-shards).
// Each sub-benchmark, run once (-benchtime=1x):
//
//  1. enters USHER_BENCH_SHARD_N visitors (default 30,000; 22-character ids)
//     from 64 goroutines, numbering them in the order their Enter returned
//     (the arrival rank): enters/s, and the primaries' used_memory delta
//     per visitor (B/visitor; server-wide, so other clients' work shows);
//  2. asks Status of 2,000 of them from 64 goroutines: status/s, and the
//     position error |position − arrival rank| (max and p99; for the
//     estimate strategy, the estimate's error);
//     With USHER_BENCH_SHARD_SKEW_MS, half the entering goroutines pass a
//     clock that far ahead (instances whose clocks disagree: only the
//     timestamp strategy reads it). busiest-share is the busiest
//     primary's share of the commands the servers ran meanwhile (INFO
//     stats; commands inside scripts count);
//  3. admits everyone with one scheduler (USHER_BENCH_SHARD_SCHEDULERS) in
//     steps of 1,000 on a simulated clock: admitted/s, and the order error
//     |admission rank − arrival rank| over every visitor (max and p99).
//
// The room's name is chosen so that its shards spread over the primaries
// as evenly as they can, as they were before PutRoom chose the tags.
func BenchmarkLine(b *testing.B) {
	if os.Getenv("USHER_BENCH_SHARD_URL") == "" {
		b.Skip("set USHER_BENCH_SHARD_URL (scripts/bench-shard.sh does)")
	}
	c := testenv.RedisAt(b, "USHER_BENCH_SHARD_URL")
	n := envInt(b, "USHER_BENCH_SHARD_N", 30_000)
	k := envInt(b, "USHER_BENCH_SHARDS", 3)
	schedulers := envInt(b, "USHER_BENCH_SHARD_SCHEDULERS", 1)
	skew := envInt(b, "USHER_BENCH_SHARD_SKEW_MS", 0)
	for _, st := range redisshard.Strategies {
		for _, shards := range []int{1, k} {
			b.Run(fmt.Sprintf("%s-%d", st, shards), func(b *testing.B) {
				for range b.N {
					if st == redisshard.CountersOnly {
						benchCounters(b, c, shards, n)
					} else {
						benchLine(b, c, st, shards, n, schedulers, skew)
					}
				}
			})
		}
	}
}

// ghostShare is the share of a counters-only room's visitors who never
// claim their turn in BenchmarkLine (every third).
const ghostShare = 3

// benchCounters is BenchmarkLine for a counters-only room: enters as
// there; positions from Claim; then steps of 1,000 turns, each followed
// by the claims of the released turns' visitors (64 goroutines) but for
// every third visitor, a ghost who never claims. The admission rank is
// the turn's place in the order of release (round-robin over the shards
// within a step); claimed/turn is what share of the released turns (the
// rate) reached a visitor.
func benchCounters(b *testing.B, c rueidis.Client, shards, n int) {
	ctx := context.Background()
	prefix := testenv.RedisPrefix(b, c)
	s := redisshard.New(c, prefix, 0)
	nodes := primaries(b, c)
	name := spreadRoom(b, c, s, shards, nodes)
	set := redisshard.Settings{Shards: shards, Strategy: redisshard.CountersOnly, MaxActive: int64(n) + 1, AdmitRate: 100_000,
		Interval: 10 * time.Millisecond, ActiveTTL: time.Hour, ClaimWindow: time.Minute}
	if err := s.PutRoom(ctx, name, set); err != nil {
		b.Fatal(err)
	}
	ids := randomIDs(n)
	type ticket struct {
		id      string
		shard   int
		seq     int64
		arrival int
	}
	tickets := make(map[[2]int64]ticket, n) // (shard, seq) → ticket
	byID := make(map[string]ticket, n)
	var mu sync.Mutex
	cost := measureEnters(b, c, nodes, s.Keys(name, shards), n, func(_, i int) error {
		e, _, err := s.Enter(ctx, name, ids[i], time.Now())
		if err != nil {
			return err
		}
		mu.Lock()
		t := ticket{id: ids[i], shard: e.Shard, seq: e.Score, arrival: len(byID)}
		byID[ids[i]], tickets[[2]int64{int64(e.Shard), e.Score}] = t, t
		mu.Unlock()
		return nil
	})

	posErr := make([]int, samples)
	cost.status = fanOut(b, 64, samples, func(_, i int) error {
		v := ids[i*n/samples]
		t := byID[v]
		e, err := s.Claim(ctx, name, v, t.shard, t.seq, time.Now())
		if err != nil {
			return err
		}
		posErr[i] = abs(int(e.Position) - 1 - t.arrival)
		return nil
	})

	var orderErr []int
	released, claimed, rank := 0, 0, 0
	t0 := time.Now()
	start := time.Now()
	for step := 0; released < n; step++ {
		now := t0.Add(time.Duration(step) * set.Interval)
		r, err := s.Admit(ctx, name, now)
		if err != nil {
			b.Fatal(err)
		}
		if r.Reserved == 0 {
			b.Fatalf("step %d released nothing with %d of %d turns released", step, released, n)
		}
		// Round-robin within the step, as the turns were given out.
		var turns []ticket
		for j := int64(0); ; j++ {
			more := false
			for _, tr := range r.Turns {
				if tr.First+j <= tr.Last {
					turns = append(turns, tickets[[2]int64{int64(tr.Shard), tr.First + j}])
					more = true
				}
			}
			if !more {
				break
			}
		}
		released += len(turns)
		var present []ticket
		for _, t := range turns {
			if t.arrival%ghostShare != ghostShare-1 {
				present = append(present, t)
				orderErr = append(orderErr, abs(rank-t.arrival))
			}
			rank++
		}
		var got atomic.Int64
		fanOut(b, 64, len(present), func(_, i int) error {
			t := present[i]
			e, err := s.Claim(ctx, name, t.id, t.shard, t.seq, now)
			if e.Status == queue.Active {
				got.Add(1)
			}
			return err
		})
		claimed += int(got.Load())
	}
	cost.admit, cost.admitted, cost.orderErr, cost.posErr = time.Since(start), claimed, orderErr, posErr
	cost.report(b)
	b.ReportMetric(float64(claimed)/float64(released), "claimed/turn")
	if want := len(orderErr); claimed != want {
		b.Errorf("claimed %d, want every present visitor's turn: %d", claimed, want)
	}
	testenv.DeleteKeys(b, c, prefix)
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return n
}

func benchLine(b *testing.B, c rueidis.Client, st redisshard.Strategy, shards, n, schedulers, skew int) {
	ctx := context.Background()
	prefix := testenv.RedisPrefix(b, c)
	s := redisshard.New(c, prefix, 0)
	nodes := primaries(b, c)
	name := spreadRoom(b, c, s, shards, nodes)
	set := redisshard.Settings{Shards: shards, Strategy: st, MaxActive: int64(n) + 1, AdmitRate: 100_000,
		Interval: 10 * time.Millisecond, ActiveTTL: time.Hour, ClaimWindow: time.Minute}
	if err := s.PutRoom(ctx, name, set); err != nil {
		b.Fatal(err)
	}
	ids := randomIDs(n)

	// 1. Enters.
	arrival := make(map[string]int, n)
	var mu sync.Mutex
	cost := measureEnters(b, c, nodes, s.Keys(name, shards), n, func(g, i int) error {
		// Every other goroutine is an instance whose clock is skew ahead.
		ahead := time.Duration(g%2*skew) * time.Millisecond
		if _, _, err := s.Enter(ctx, name, ids[i], time.Now().Add(ahead)); err != nil {
			return err
		}
		mu.Lock()
		arrival[ids[i]] = len(arrival)
		mu.Unlock()
		return nil
	})

	// 2. Positions.
	posErr := make([]int, samples)
	cost.status = fanOut(b, 64, samples, func(_, i int) error {
		v := ids[i*n/samples]
		e, err := s.Status(ctx, name, v, time.Now())
		if err != nil {
			return err
		}
		posErr[i] = abs(int(e.Position) - 1 - arrival[v])
		return nil
	})

	// 3. Admission.
	var order []string
	t0 := time.Now()
	var (
		step atomic.Int64
		wg   sync.WaitGroup
	)
	start := time.Now()
	for range schedulers {
		wg.Go(func() {
			for {
				mu.Lock()
				done := len(order) >= n
				mu.Unlock()
				if done {
					return
				}
				i := step.Add(1) - 1
				r, err := s.Admit(ctx, name, t0.Add(time.Duration(i)*set.Interval))
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				order = append(order, r.Admitted...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	cost.admit, cost.admitted = time.Since(start), len(order)
	cost.orderErr = make([]int, len(order))
	for rank, v := range order {
		cost.orderErr[rank] = abs(rank - arrival[v])
	}
	cost.posErr = posErr
	cost.report(b)
	if len(order) != n {
		b.Errorf("admitted %d, want %d", len(order), n)
	}
	testenv.DeleteKeys(b, c, prefix) // before the next sub-benchmark's memory reading
}

func abs(x int) int { return max(x, -x) }

func p99(xs []int) int {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)*99/100]
}

// primaries returns a client per primary (one for a single Redis).
func primaries(b *testing.B, c rueidis.Client) map[string]rueidis.Client {
	text, err := c.Do(context.Background(), c.B().ClusterNodes().Build()).ToString()
	if err != nil { // not a cluster
		return map[string]rueidis.Client{"": c}
	}
	out := map[string]rueidis.Client{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.Contains(f[2], "master") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		out[addr] = c.Nodes()[addr]
	}
	if len(out) == 1 { // a lone primary may not know its own address
		return map[string]rueidis.Client{"": c}
	}
	for addr, node := range out {
		if node == nil {
			b.Fatalf("no client for primary %s", addr)
		}
	}
	return out
}

// settle waits (up to 5 s) until no primary has objects left to free in
// the background (the previous run's keys, UNLINKed), so that they do not
// count against this run's used_memory.
func settle(b *testing.B, nodes map[string]rueidis.Client) {
	for range 500 {
		pending := int64(0)
		for _, node := range nodes {
			pending += infoField(b, node, "memory", "lazyfree_pending_objects")
		}
		if pending == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// infoField reads one integer field of an INFO section.
func infoField(b *testing.B, node rueidis.Client, section, field string) int64 {
	text, err := node.Do(context.Background(), node.B().Info().Section(section).Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(text, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	return 0
}

// commands reads each primary's total_commands_processed.
func commands(b *testing.B, nodes map[string]rueidis.Client) map[string]int64 {
	out := map[string]int64{}
	for addr, node := range nodes {
		out[addr] = infoField(b, node, "stats", "total_commands_processed")
	}
	return out
}

// busiestShare is the largest primary's share of the commands run since
// before.
func busiestShare(b *testing.B, nodes map[string]rueidis.Client, before map[string]int64) float64 {
	var sum, most int64
	for addr, n := range commands(b, nodes) {
		d := n - before[addr]
		sum, most = sum+d, max(most, d)
	}
	return float64(most) / float64(max(sum, 1))
}

// usedMemory sums INFO memory's used_memory over the primaries.
func usedMemory(b *testing.B, c rueidis.Client, nodes map[string]rueidis.Client) int64 {
	var sum int64
	for _, node := range nodes {
		sum += infoField(b, node, "memory", "used_memory")
	}
	return sum
}

// spreadRoom returns a room name whose line shards land on the primaries
// as evenly as they can (counts differing by at most one).
func spreadRoom(b *testing.B, c rueidis.Client, s *redisshard.Store, shards int, nodes map[string]rueidis.Client) string {
	if len(nodes) == 1 {
		return "hot"
	}
	ctx := context.Background()
	for attempt := range 1000 {
		name := fmt.Sprintf("hot-%d", attempt)
		per := map[string]int{}
		for i := range shards {
			key := s.WaitKey(name, i)
			owner, err := c.Do(ctx, c.B().ClusterKeyslot().Key(key).Build()).AsInt64()
			if err != nil {
				b.Fatal(err)
			}
			addr, err := testenv.SlotOwner(ctx, c, int(owner))
			if err != nil {
				b.Fatal(err)
			}
			per[addr]++
		}
		lo, hi := shards, 0
		for addr := range nodes {
			lo, hi = min(lo, per[addr]), max(hi, per[addr])
		}
		if hi-lo <= 1 {
			return name
		}
	}
	b.Fatal("no room name spreads its shards evenly")
	return ""
}

// samples is how many positions a run reads.
const samples = 2000

// lineCost is what a run of either benchmark measured.
type lineCost struct {
	n                int           // visitors who entered
	enter            time.Duration // their enters, from 64 goroutines
	memory           int64         // the primaries' used_memory delta
	busiest          float64       // the busiest primary's share of the enters' commands
	keyBytes         int64         // the room's keys' MEMORY USAGE
	status           time.Duration // samples position reads
	admitted         int
	admit            time.Duration
	orderErr, posErr []int
}

// report reports c's metrics on b.
func (c lineCost) report(b *testing.B) {
	b.ReportMetric(float64(c.n)/c.enter.Seconds(), "enters/s")
	b.ReportMetric(float64(c.memory)/float64(c.n), "B/visitor")
	b.ReportMetric(c.busiest, "busiest-share")
	b.ReportMetric(float64(c.keyBytes)/float64(c.n), "keyB/visitor")
	b.ReportMetric(samples/c.status.Seconds(), "status/s")
	b.ReportMetric(float64(c.admitted)/c.admit.Seconds(), "admitted/s")
	b.ReportMetric(float64(slices.Max(c.orderErr)), "ordererr-max")
	b.ReportMetric(float64(p99(c.orderErr)), "ordererr-p99")
	b.ReportMetric(float64(slices.Max(c.posErr)), "poserr-max")
	b.ReportMetric(float64(p99(c.posErr)), "poserr-p99")
}

// measureEnters runs enter(g, i) for every i in [0, n) from 64 goroutines
// on settled servers, timed, and reads what the enters cost the
// primaries: memory, the busiest one's share of the commands, and the
// memory of keys (the room's).
func measureEnters(b *testing.B, c rueidis.Client, nodes map[string]rueidis.Client, keys []string, n int, enter func(g, i int) error) lineCost {
	settle(b, nodes)
	before := usedMemory(b, c, nodes)
	calls := commands(b, nodes)
	b.ResetTimer()
	took := fanOut(b, 64, n, enter)
	b.StopTimer()
	return lineCost{n: n, enter: took, memory: usedMemory(b, c, nodes) - before,
		busiest: busiestShare(b, nodes, calls), keyBytes: keysMemory(b, c, keys)}
}

// randomIDs are n visitor ids of 22 characters (16 random bytes).
func randomIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		r := make([]byte, 16)
		rand.Read(r)
		ids[i] = base64.RawURLEncoding.EncodeToString(r)
	}
	return ids
}

// keysMemory is the sum of MEMORY USAGE over keys (a missing key counts 0).
func keysMemory(b *testing.B, c rueidis.Client, keys []string) int64 {
	b.Helper()
	var sum int64
	for _, key := range keys {
		n, err := c.Do(context.Background(), c.B().MemoryUsage().Key(key).Samples(0).Build()).AsInt64()
		if err != nil && !rueidis.IsRedisNil(err) {
			b.Fatal(err)
		}
		sum += n
	}
	return sum
}
