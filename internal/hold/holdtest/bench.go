package holdtest

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// Bench measures a backend's seat holds of 1 and 4 seats, stock holds and
// Get, each in parallel (b.RunParallel) as the HTTP server would call them.
// The clock moves 1 ms per operation and holds last 1 s, so the store stays
// at about a thousand live holds and each call also expires about one: the
// steady state of a busy sale, not an ever-growing store.
func Bench(b *testing.B, newStore NewStore) {
	ctx := context.Background()
	const benchTTL = time.Second
	for _, n := range []int{1, 4} {
		b.Run(fmt.Sprintf("HoldSeats/%d", n), func(b *testing.B) {
			s := newStore(b)
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				seats := make([]string, n)
				for pb.Next() {
					i := next.Add(1)
					for j := range seats {
						seats[j] = "s" + strconv.FormatInt(i*int64(n)+int64(j), 10)
					}
					holder := "h" + strconv.FormatInt(i%1024, 10)
					now := t0.Add(time.Duration(i) * time.Millisecond)
					if _, err := s.HoldSeats(ctx, "bench", holder, seats, 1<<20, benchTTL, now); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
	b.Run("HoldStock", func(b *testing.B) {
		s := newStore(b)
		if err := s.SetStock(ctx, "bench", 1<<40); err != nil {
			b.Fatal(err)
		}
		var next atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := next.Add(1)
				holder := "h" + strconv.FormatInt(i%1024, 10)
				now := t0.Add(time.Duration(i) * time.Millisecond)
				if _, err := s.HoldStock(ctx, "bench", holder, 1, 1<<20, benchTTL, now); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("Get", func(b *testing.B) {
		s := newStore(b)
		const holds = 1000
		ids := make([]string, holds)
		for i := range ids {
			ids[i] = mustHoldSeats(b, s, "bench", "h"+strconv.Itoa(i), []string{"s" + strconv.Itoa(i)}, 1, time.Hour, t0).ID
		}
		var next atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Get(ctx, "bench", ids[next.Add(1)%holds], t0); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
