package bookingtest

import (
	"context"
	"fmt"
	mathrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"usher/internal/booking"
)

// Bench measures a backend's bulk seat creation and its Decide throughput
// for a stream of one-seat reservations, one call at a time and in batches
// of 100, from 8 concurrent callers (the consumer's shape).
func Bench(b *testing.B, newStore NewStore) {
	b.Run("AddSeats", func(b *testing.B) {
		s := newStore(b)
		sch, _ := catalog(b, s, 0)
		const perCall = 10_000
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i += perCall {
			in := specs(fmt.Sprint(i), min(perCall, b.N-i))
			if _, err := s.AddSeats(context.Background(), sch.ID, in); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "seats/s")
	})
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("Decide/batch=%d", batch), func(b *testing.B) {
			ConfirmThroughput(b, newStore(b), 8, batch)
		})
	}
}

// ConfirmThroughput sells b.N seats of a new schedule through s.Decide: one
// one-seat reservation per seat, in random seat order, batch reservations
// per call, from workers goroutines. Seat creation is not timed. It reports
// confirmations/s and fails if any reservation is rejected.
func ConfirmThroughput(b *testing.B, s booking.Store, workers, batch int) {
	b.Helper()
	ctx := context.Background()
	c, err := s.CreateConcert(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	sch, err := s.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID, StartsAt: t0})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]int64, 0, b.N)
	for len(ids) < b.N {
		more, err := s.AddSeats(ctx, sch.ID, specs(fmt.Sprint("S", len(ids)), min(50_000, b.N-len(ids))))
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, more...)
	}
	mathrand.New(mathrand.NewPCG(uint64(b.N), 1)).Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	prefix := fmt.Sprintf("bench-%d-%d-", sch.ID, b.N)

	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs := make([]booking.Reservation, 0, batch)
			for {
				start := int(next.Add(int64(batch))) - batch
				if start >= len(ids) {
					return
				}
				rs = rs[:0]
				for i, id := range ids[start:min(start+batch, len(ids))] {
					rs = append(rs, booking.Reservation{
						ID: prefix + fmt.Sprint(start+i), Visitor: "v", ScheduleID: sch.ID,
						SeatIDs: []int64{id}, Status: booking.Pending, CreatedAt: t0,
					})
				}
				got, err := s.Decide(ctx, rs)
				if err != nil {
					b.Error(err)
					return
				}
				for _, r := range got {
					if r.Status != booking.Confirmed {
						b.Errorf("%s: %s (%s), want confirmed", r.ID, r.Status, r.Reason)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "confirmations/s")
}
