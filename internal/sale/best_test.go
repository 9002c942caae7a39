package sale_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"usher/internal/booking"
	"usher/internal/booking/sqlitebooking"
	"usher/internal/hold"
	"usher/internal/sale"
)

// TestHoldBestConcurrent: many goroutines asking for the best 1 to 4
// adjacent seats of one section at once: no seat is held twice, every
// hold is adjacent seats of one row of that section, and a request
// refused for want of adjacent seats was refused rightly: no row has that
// many adjacent seats free at the end (seats only get taken here).
func TestHoldBestConcurrent(t *testing.T) {
	r := newRig(t, 1)
	ctx := context.Background()
	c, err := r.svc.CreateConcert(ctx, "best")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := r.svc.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.AddSeats(ctx, sch.ID, sale.SeatLayout{Sections: []string{"A", "B"}, Rows: 4, SeatsPerRow: 12, Price: 100}); err != nil {
		t.Fatal(err)
	}
	all, err := r.catalog.Seats(ctx, sch.ID)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int64]booking.SeatSpec{}
	for _, s := range all {
		byID[s.ID] = s.SeatSpec
	}

	const workers, each = 24, 4
	var mu sync.Mutex
	owner := map[int64]string{}
	refused := map[int]bool{} // counts refused for want of adjacent seats
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for k := range each {
				visitor, count := fmt.Sprintf("v%d-%d", g, k), 1+(g+k)%4
				h, seats, err := r.svc.HoldBest(ctx, sch.ID, visitor, sale.BestRequest{Count: count, Section: "A"})
				mu.Lock()
				switch {
				case errors.Is(err, sale.ErrNoAdjacent):
					refused[count] = true
				case errors.Is(err, hold.ErrTaken): // contention beyond the tries: allowed, nothing held
				case err != nil:
					t.Errorf("%s: %v", visitor, err)
				case len(seats) != count || len(h.Seats) != count:
					t.Errorf("%s asked for %d seats, got %v (hold %v)", visitor, count, seats, h.Seats)
				default:
					first := byID[seats[0]]
					for i, id := range seats {
						s := byID[id]
						if s.Section != "A" || s.Row != first.Row || s.Number != first.Number+i {
							t.Errorf("%s got %v: seat %d is %+v, not adjacent in row %s of A", visitor, seats, id, s, first.Row)
						}
						if o, ok := owner[id]; ok {
							t.Errorf("seat %d held by %s and %s", id, o, visitor)
						}
						owner[id] = visitor
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(owner) == 0 {
		t.Fatal("no seat held")
	}
	// The longest run of free adjacent seats left in any row of A.
	most := 0
	for row := 1; row <= 4; row++ {
		run := 0
		for n := 1; n <= 12; n++ {
			id := seatAt(byID, "A", fmt.Sprint(row), n)
			if _, held := owner[id]; held {
				run = 0
				continue
			}
			run++
			most = max(most, run)
		}
	}
	for count := range refused {
		if count <= most {
			t.Errorf("a request for %d adjacent seats was refused, but %d adjacent seats are still free", count, most)
		}
	}
	for id := range owner {
		if byID[id].Section != "A" {
			t.Errorf("seat %d of section %s held for section A", id, byID[id].Section)
		}
	}
}

func seatAt(byID map[int64]booking.SeatSpec, section, row string, number int) int64 {
	for id, s := range byID {
		if s.Section == section && s.Row == row && s.Number == number {
			return id
		}
	}
	return 0
}

// TestHoldBestCrowd: a crowd asking one instance for the best seat at
// once, on a snapshot that is not rebuilt meanwhile, is served in one try
// each: every request gets a seat, none twice.
func TestHoldBestCrowd(t *testing.T) {
	catalog, err := sqlitebooking.Open(context.Background(), filepath.Join(t.TempDir(), "booking.db"))
	if err != nil {
		t.Fatal(err)
	}
	r := newRigConfig(t, 1, catalog, nil, func(c *sale.Config) { c.SnapshotEvery = time.Hour })
	ctx := context.Background()
	c, err := r.svc.CreateConcert(ctx, "crowd")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := r.svc.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.AddSeats(ctx, sch.ID, sale.SeatLayout{Sections: []string{"A"}, Rows: 10, SeatsPerRow: 20, Price: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.SeatMap(ctx, sch.ID); err != nil { // the snapshot every request reads
		t.Fatal(err)
	}
	const crowd = 150
	var mu sync.Mutex
	owner := map[int64]string{}
	var wg sync.WaitGroup
	for g := range crowd {
		wg.Go(func() {
			visitor := fmt.Sprintf("v%d", g)
			_, seats, err := r.svc.HoldBest(ctx, sch.ID, visitor, sale.BestRequest{Count: 1})
			mu.Lock()
			defer mu.Unlock()
			if err != nil || len(seats) != 1 {
				t.Errorf("%s: %v, %v; want a seat", visitor, seats, err)
				return
			}
			if o, ok := owner[seats[0]]; ok {
				t.Errorf("seat %d held by %s and %s", seats[0], o, visitor)
			}
			owner[seats[0]] = visitor
		})
	}
	wg.Wait()
	if len(owner) != crowd {
		t.Errorf("%d seats held for %d requests", len(owner), crowd)
	}
}
