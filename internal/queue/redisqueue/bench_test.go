package redisqueue_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	mathrand "math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/queue"
	"usher/internal/queue/redisqueue"
	"usher/internal/testenv"
)

// BenchmarkEnterConcurrency50 measures Enter into a paused room (every
// visitor waits) from 50 goroutines sharing one client, the shape that
// scripts/bench-redis.sh compares with redis-benchmark running the same
// EVALSHA at -c 50. Visitor ids are "v" and 12 random digits, like
// redis-benchmark's __rand_int__ with -r 1000000000.
func BenchmarkEnterConcurrency50(b *testing.B) {
	const concurrency = 50
	c := openClient(b)
	ctx := context.Background()
	s := newStoreFunc(c)(b)
	set := queue.DefaultSettings()
	set.State = queue.Paused
	if _, err := s.PutRoom(ctx, "enter50", set, queue.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	enterConcurrently(b, s, "enter50", concurrency)
}

// enterConcurrently enters b.N new visitors into room from conc
// goroutines and reports enters/s.
func enterConcurrently(b *testing.B, s queue.Store, room string, conc int) {
	ctx, now := context.Background(), time.Now()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	for range conc {
		wg.Go(func() {
			var buf []byte
			for left.Add(-1) >= 0 {
				buf = fmt.Appendf(buf[:0], "v%012d", mathrand.IntN(1_000_000_000))
				if _, _, err := s.Enter(ctx, room, string(buf), now, queue.EnterOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "enters/s")
}

// BenchmarkMemoryPerWaitingVisitor enters 1,000,000 visitors with realistic
// ids (16 random bytes, base64url: 22 characters) into a paused room and
// reports the server's used_memory growth per visitor (bytes/visitor, all
// in) and the room's own MEMORY USAGE per visitor (key-bytes/visitor). It
// needs USHER_BENCH_MEMORY=1 as well as USHER_TEST_REDIS; run it with
// -benchtime=1x on an otherwise idle server, since used_memory is
// server-wide.
func BenchmarkMemoryPerWaitingVisitor(b *testing.B) {
	if os.Getenv("USHER_BENCH_MEMORY") == "" {
		b.Skip("USHER_BENCH_MEMORY is not set; set USHER_BENCH_MEMORY=1 (and USHER_TEST_REDIS) to fill Redis with 1,000,000 visitors")
	}
	const (
		visitors    = 1_000_000
		concurrency = 100
	)
	c := openClient(b)
	ctx := context.Background()
	ids := make([]string, visitors)
	raw := make([]byte, 16)
	for i := range ids {
		rand.Read(raw)
		ids[i] = base64.RawURLEncoding.EncodeToString(raw)
	}
	for range b.N {
		b.StopTimer()
		prefix := testenv.RedisPrefix(b, c)
		s := redisqueue.New(c, prefix)
		set := queue.DefaultSettings()
		set.State = queue.Paused
		if _, err := s.PutRoom(ctx, "mem", set, queue.PutOptions{}); err != nil {
			b.Fatal(err)
		}
		before := usedMemory(b, c)
		b.StartTimer()
		var next atomic.Int64
		var wg sync.WaitGroup
		now := time.Now()
		for range concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1) - 1; i < visitors; i = next.Add(1) - 1 {
					if _, _, err := s.Enter(ctx, "mem", ids[i], now, queue.EnterOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.StopTimer()
		st, err := s.Stats(ctx, "mem", now)
		if err != nil {
			b.Fatal(err)
		}
		if st.Waiting != visitors {
			b.Fatalf("waiting = %d, want %d", st.Waiting, visitors)
		}
		after := usedMemory(b, c)
		usage, err := c.Do(ctx, c.B().MemoryUsage().Key(prefix+"{mem}:wait").Samples(0).Build()).AsInt64()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(after-before)/visitors, "bytes/visitor")
		b.ReportMetric(float64(usage)/visitors, "key-bytes/visitor")
		testenv.DeleteKeys(b, c, prefix)
		b.StartTimer()
	}
}

// BenchmarkMemoryPerActiveVisitor is BenchmarkMemoryPerWaitingVisitor for
// the active set: it enters 1,000,000 visitors (same ids) into a paused
// room, then opens it and admits them all, 50,000 a step on a clock moved
// a second a step (so that no script holds Redis for long), and reports
// the used_memory growth from the empty room per active visitor
// (bytes/visitor: the emptied wait set's table may still be counted) and
// the active key's MEMORY USAGE per visitor (key-bytes/visitor). Presence
// is off: nobody polls. Same conditions as the waiting benchmark; run it
// alone (-bench with its full name): the keys a previous benchmark
// unlinked are freed in the background and would count against it.
func BenchmarkMemoryPerActiveVisitor(b *testing.B) {
	if os.Getenv("USHER_BENCH_MEMORY") == "" {
		b.Skip("USHER_BENCH_MEMORY is not set; set USHER_BENCH_MEMORY=1 (and USHER_TEST_REDIS) to fill Redis with 1,000,000 visitors")
	}
	const (
		visitors    = 1_000_000
		concurrency = 100
		step        = 50_000
	)
	c := openClient(b)
	ctx := context.Background()
	ids := make([]string, visitors)
	raw := make([]byte, 16)
	for i := range ids {
		rand.Read(raw)
		ids[i] = base64.RawURLEncoding.EncodeToString(raw)
	}
	for range b.N {
		b.StopTimer()
		prefix := testenv.RedisPrefix(b, c)
		s := redisqueue.New(c, prefix)
		set := queue.DefaultSettings()
		set.State, set.MaxActive, set.AdmitRate, set.Interval, set.PresenceTimeout = queue.Paused, visitors, step, time.Second, 0
		set.ActiveTTL = time.Hour
		if _, err := s.PutRoom(ctx, "mem", set, queue.PutOptions{}); err != nil {
			b.Fatal(err)
		}
		before := usedMemory(b, c)
		now := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1) - 1; i < visitors; i = next.Add(1) - 1 {
					if _, _, err := s.Enter(ctx, "mem", ids[i], now, queue.EnterOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		set.State = queue.Open
		if _, err := s.PutRoom(ctx, "mem", set, queue.PutOptions{}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for admitted := 0; admitted < visitors; {
			now = now.Add(time.Second)
			res, err := s.Admit(ctx, "mem", now)
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Admitted) == 0 {
				b.Fatalf("a step admitted nobody after %d", admitted)
			}
			admitted += len(res.Admitted)
		}
		b.StopTimer()
		st, err := s.Stats(ctx, "mem", now)
		if err != nil {
			b.Fatal(err)
		}
		if st.Active != visitors || st.Waiting != 0 {
			b.Fatalf("active %d, waiting %d; want %d and 0", st.Active, st.Waiting, visitors)
		}
		after := usedMemory(b, c)
		usage, err := c.Do(ctx, c.B().MemoryUsage().Key(prefix+"{mem}:active").Samples(0).Build()).AsInt64()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(after-before)/visitors, "bytes/visitor")
		b.ReportMetric(float64(usage)/visitors, "key-bytes/visitor")
		testenv.DeleteKeys(b, c, prefix)
		b.StartTimer()
	}
}

// usedMemory reads used_memory from INFO memory.
func usedMemory(tb testing.TB, c rueidis.Client) int64 {
	tb.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("memory").Build()).ToString()
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Fatal("INFO memory has no used_memory")
	return 0
}

// BenchmarkHotPath measures the store calls of a visitor's hot path, one
// at a time: entering a line (enter), polling a place in it (status), and
// polling in a room whose opening draw is over (status-drawn: every room
// with an opens_at, for the rest of its life). Besides time and
// allocations it reports the commands Redis ran per call (cmds/op: the
// EVALSHA and the commands inside the script, from INFO's
// total_commands_processed) and the script's server time (evalsha-µs/op,
// INFO commandstats), which count only while nothing else uses the Redis
// (scripts/bench-compare.sh runs this against another commit's tree).
func BenchmarkHotPath(b *testing.B) {
	c := openClient(b)
	ctx := context.Background()
	s := newStoreFunc(c)(b)
	now := time.Now()
	paused := queue.DefaultSettings()
	paused.State = queue.Paused // everyone waits: no admission, no passthrough
	drawn := paused
	drawn.OpensAt = now.Add(-time.Minute)
	for room, set := range map[string]queue.Settings{"line": paused, "drawn": drawn} {
		if _, err := s.PutRoom(ctx, room, set, queue.PutOptions{}); err != nil {
			b.Fatal(err)
		}
		for i := range 100 {
			if _, _, err := s.Enter(ctx, room, fmt.Sprintf("ahead-%03d", i), now, queue.EnterOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := s.Stats(ctx, room, now); err != nil { // as a view refresh does
			b.Fatal(err)
		}
	}
	measure := func(b *testing.B, call func(i int) error) {
		cmds0, usec0 := redisCost(b, c)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if err := call(i); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		cmds1, usec1 := redisCost(b, c)
		b.ReportMetric(float64(cmds1-cmds0-2)/float64(b.N), "cmds/op") // less the INFOs
		b.ReportMetric(float64(usec1-usec0)/float64(b.N), "evalsha-µs/op")
	}
	b.Run("enter", func(b *testing.B) {
		run := strconv.FormatInt(time.Now().UnixNano(), 36)
		measure(b, func(i int) error {
			_, _, err := s.Enter(ctx, "line", "v-"+run+"-"+strconv.Itoa(i), now, queue.EnterOptions{})
			return err
		})
	})
	for _, room := range []string{"line", "drawn"} {
		name := "status"
		if room == "drawn" {
			name = "status-drawn"
		}
		b.Run(name, func(b *testing.B) {
			measure(b, func(int) error {
				e, err := s.Status(ctx, room, "ahead-050", now)
				if err == nil && e.Position != 51 {
					err = fmt.Errorf("position %d, want 51", e.Position)
				}
				return err
			})
		})
	}
}

// redisCost reads the server's commands processed and the EVALSHA time
// (µs) so far.
func redisCost(b *testing.B, c rueidis.Client) (cmds, evalshaUsec int64) {
	info, err := c.Do(context.Background(), c.B().Info().Section("stats").Section("commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
			cmds, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "cmdstat_evalsha:"); ok {
			for f := range strings.SplitSeq(v, ",") {
				if u, ok := strings.CutPrefix(f, "usec="); ok {
					evalshaUsec, _ = strconv.ParseInt(u, 10, 64)
				}
			}
		}
	}
	return cmds, evalshaUsec
}

// BenchmarkEnterAck measures Enter through the sentinels of
// USHER_TEST_REDIS_SENTINEL from 50 goroutines (USHER_BENCH_CONCURRENCY), acknowledged as soon as
// the primary has the entry (wait_replicas=0, the old behaviour) and once
// a replica has it too (a Sentinel URL's default: WAIT 1 100). Run with
// -count: the two alternate, so that the machine's load weighs on both
// (docs/benchmarks.md#redis-sentinel-partition).
func BenchmarkEnterAck(b *testing.B) {
	url := testenv.URL(b, "USHER_TEST_REDIS_SENTINEL")
	for _, q := range []string{"wait_replicas=0", "wait_replicas=1"} {
		b.Run(q, func(b *testing.B) {
			conc := 50
			if v, err := strconv.Atoi(os.Getenv("USHER_BENCH_CONCURRENCY")); err == nil && v > 0 {
				conc = v
			}
			ctx := context.Background()
			c, err := redisqueue.Open(ctx, url+"&"+q)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(c.Close) // after RedisPrefix's cleanup
			s := redisqueue.New(c, testenv.RedisPrefix(b, c))
			ack, err := redisqueue.ParseAck(url + "&" + q)
			if err != nil {
				b.Fatal(err)
			}
			s.SetAck(ack)
			set := queue.DefaultSettings()
			set.State = queue.Paused
			if _, err := s.PutRoom(ctx, "ack", set, queue.PutOptions{}); err != nil {
				b.Fatal(err)
			}
			enterConcurrently(b, s, "ack", conc)
		})
	}
}
