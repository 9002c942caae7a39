package sale_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"usher/internal/booking"
	"usher/internal/booking/sqlitebooking"
	"usher/internal/sale"
)

// countingSeats counts the catalog's seat reads: the seat map rebuilds.
type countingSeats struct {
	booking.Store
	reads atomic.Int64
}

func (c *countingSeats) Seats(ctx context.Context, id int64) ([]booking.Seat, error) {
	c.reads.Add(1)
	return c.Store.Seats(ctx, id)
}

// BenchmarkSeatEventFanOut: 1 or 1,000 visitors follow a 50,000-seat
// schedule (SQLite, --seat-map-every at its default 500ms); each op is one hold, timed
// until every follower has the event naming its seat (the slowest op as
// max-ms). It reports the seat map rebuilds (database reads of the seats)
// per op, which the followers do not multiply.
//
//	go test -run '^$' -bench SeatEventFanOut -benchtime 20x ./internal/sale/
func BenchmarkSeatEventFanOut(b *testing.B) {
	for _, followers := range []int{1, 1000} {
		b.Run(fmt.Sprint("followers=", followers), func(b *testing.B) { fanOut(b, followers) })
	}
}

func fanOut(b *testing.B, followers int) {
	const seats = 50_000
	db, err := sqlitebooking.Open(context.Background(), filepath.Join(b.TempDir(), "booking.db"))
	if err != nil {
		b.Fatal(err)
	}
	catalog := &countingSeats{Store: db}
	r := newRigConfig(b, seats, catalog, nil, func(c *sale.Config) { c.SnapshotEvery = 500 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make([]chan int64, followers) // each follower's held seats
	for i := range got {
		ch, err := r.svc.FollowSeatMap(ctx, r.sched.ID, "")
		if err != nil {
			b.Fatal(err)
		}
		got[i] = make(chan int64, 64)
		go func() {
			for e := range ch {
				st := decodeEvent(b, e)
				if st.Changes == nil {
					continue
				}
				for _, id := range st.Changes.Held {
					got[i] <- id
				}
			}
		}()
	}
	reads := catalog.reads.Load()
	var slowest time.Duration
	b.ResetTimer()
	for n := range b.N {
		start := time.Now()
		seat := r.seats[n*7]
		if _, err := r.svc.Hold(ctx, r.sched.ID, fmt.Sprint("v", n), []int64{seat}); err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, ch := range got {
			wg.Go(func() {
				var ids []int64
				for !slices.Contains(ids, seat) {
					ids = append(ids, <-ch)
				}
			})
		}
		wg.Wait()
		slowest = max(slowest, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(slowest.Seconds()*1000, "max-ms")
	b.ReportMetric(float64(catalog.reads.Load()-reads)/float64(b.N), "rebuilds/op")
}
