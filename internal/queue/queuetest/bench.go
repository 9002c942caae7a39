package queuetest

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"usher/internal/queue"
)

// Bench measures a backend's enter, status and admission step. Enter and
// Status run from 50 goroutines (b.RunParallel with SetParallelism), as the
// HTTP server would, so a network backend's figure is throughput, not
// latency.
func Bench(b *testing.B, newStore NewStore) {
	ctx := context.Background()
	b.Run("Enter", func(b *testing.B) {
		s := newStore(b)
		mustPut(b, s, "r", settings(1, 1))
		mustEnter(b, s, "r", "first", t0) // takes the only slot: the rest wait
		var n atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(concurrency(50))
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, _, err := s.Enter(ctx, "r", fmt.Sprintf("v%d", n.Add(1)), t0, queue.EnterOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("Status", func(b *testing.B) {
		s := newStore(b)
		const waiting = 10_000
		vs := fill(b, s, "r", settings(1, 1), waiting)
		var n atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(concurrency(50))
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Status(ctx, "r", vs[n.Add(1)%waiting], t0); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("Admit", func(b *testing.B) {
		s := newStore(b)
		set := settings(1e9, 1e5) // batch 10,000 per 100 ms: 100 per 1 ms step
		paused := set
		paused.State = queue.Paused
		var clock atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			mustPut(b, s, "r", paused) // no passthrough while refilling
			var wg sync.WaitGroup
			for g := range 10 { // 10 × 10 enters, concurrently: a network store's round trips overlap
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 10 {
						mustEnter(b, s, "r", fmt.Sprintf("w%d-%d-%d", clock.Load(), g, i), t0)
					}
				}()
			}
			wg.Wait()
			mustPut(b, s, "r", set)
			b.StartTimer()
			now := t0.Add(time.Duration(clock.Add(1)) * time.Millisecond)
			res, err := s.Admit(ctx, "r", now)
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Admitted) != 100 {
				b.Fatalf("step admitted %d, want 100", len(res.Admitted))
			}
		}
	})
	// Opening: the first admission step at the opening of a room whose
	// pre-queue holds 100,000 entrants, which runs the draw (the entering
	// is not timed). Run it with -benchtime 1x..5x: each op fills a room.
	// Step100k is the same step in a room without opens_at whose 100,000
	// visitors entered while it was paused: the reference for the draw's
	// own cost.
	for _, draw := range []bool{true, false} {
		name := "Opening100k"
		if !draw {
			name = "Step100k"
		}
		b.Run(name, func(b *testing.B) { benchOpening(b, newStore(b), draw) })
	}
}

func benchOpening(b *testing.B, s queue.Store, draw bool) {
	ctx := context.Background()
	const entrants = 100_000
	for i := range b.N {
		b.StopTimer()
		room := fmt.Sprintf("o%d", i)
		set := settings(1e9, 1e5) // batch 10,000 per 100 ms
		set.OpensAt = t0.Add(time.Hour)
		paused := set
		paused.State, paused.OpensAt = queue.Paused, time.Time{}
		if draw {
			mustPut(b, s, room, set)
		} else {
			mustPut(b, s, room, paused)
		}
		var wg sync.WaitGroup
		for g := range 50 {
			wg.Go(func() {
				for j := g; j < entrants; j += 50 {
					mustEnter(b, s, room, fmt.Sprintf("visitor-%d-%07d", i, j), t0)
				}
			})
		}
		wg.Wait()
		if !draw {
			set.OpensAt = time.Time{}
			mustPut(b, s, room, set)
		}
		b.StartTimer()
		res, err := s.Admit(ctx, room, t0.Add(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Admitted) < 10_000 {
			b.Fatalf("the opening step admitted %d, want 10,000", len(res.Admitted))
		}
	}
}

// concurrency returns the SetParallelism factor giving about n goroutines.
func concurrency(n int) int { return max(1, n/runtime.GOMAXPROCS(0)) }
