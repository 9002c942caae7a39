package queuetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"usher/internal/queue"
)

// Bench measures a backend's enter, status and admission step. Each
// sub-benchmark runs in parallel (b.RunParallel), as the HTTP server would.
func Bench(b *testing.B, newStore NewStore) {
	ctx := context.Background()
	b.Run("Enter", func(b *testing.B) {
		s := newStore(b)
		mustPut(b, s, "r", settings(1, 1))
		mustEnter(b, s, "r", "first", t0) // takes the only slot: the rest wait
		var n atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, _, err := s.Enter(ctx, "r", fmt.Sprintf("v%d", n.Add(1)), t0); err != nil {
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
			for i := range 100 {
				mustEnter(b, s, "r", fmt.Sprintf("w%d-%d", clock.Load(), i), t0)
			}
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
}
