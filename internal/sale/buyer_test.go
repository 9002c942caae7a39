package sale_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"usher/internal/booking"
	"usher/internal/booking/sqlitebooking"
	"usher/internal/hold"
	"usher/internal/sale"
)

// TestBuyerLimitConcurrent: one buyer holding and reserving distinct seats
// from many goroutines at once never gets more than BuyerLimit tickets
// confirmed; every refusal is buyer_limit (or a hold limit), never a sale
// beyond the limit, and SQL's count matches the seats sold.
func TestBuyerLimitConcurrent(t *testing.T) {
	const limit, tries = 3, 24
	catalog, err := sqlitebooking.Open(context.Background(), filepath.Join(t.TempDir(), "booking.db"))
	if err != nil {
		t.Fatal(err)
	}
	r := newRigConfig(t, tries, catalog, nil, func(c *sale.Config) { c.BuyerLimit = limit })
	ctx := context.Background()
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	for i := range tries {
		wg.Go(func() {
			seat := r.seats[i]
			if _, err := r.svc.Hold(ctx, r.sched.ID, "mallory", []int64{seat}); err != nil {
				if !errors.Is(err, sale.ErrBuyerLimit) && !errors.Is(err, hold.ErrLimit) {
					t.Errorf("hold %d: %v", seat, err)
				}
				return
			}
			res, _, err := r.svc.Reserve(ctx, "mallory", r.sched.ID, []int64{seat}, fmt.Sprint("k", i))
			if err != nil {
				if !errors.Is(err, sale.ErrBuyerLimit) {
					t.Errorf("reserve %d: %v", seat, err)
				}
				return
			}
			mu.Lock()
			ids = append(ids, res.ID)
			mu.Unlock()
		})
	}
	wg.Wait()
	confirmed := 0
	for _, id := range ids {
		switch res := r.wait(t, "mallory", id); {
		case res.Status == booking.Confirmed:
			confirmed++
		case res.Reason != booking.ReasonBuyerLimit:
			t.Errorf("reservation %s: %s %s, want confirmed or buyer_limit", id, res.Status, res.Reason)
		}
	}
	if confirmed > limit || confirmed == 0 {
		t.Errorf("%d of %d reservations confirmed for one buyer, want 1 to %d", confirmed, len(ids), limit)
	}
	sold := 0
	seats, err := catalog.Seats(ctx, r.sched.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range seats {
		if s.Status == booking.Sold {
			sold++
		}
	}
	n, err := catalog.BuyerTickets(ctx, r.sched.ID, "mallory")
	if err != nil || sold != confirmed || n != int64(confirmed) {
		t.Errorf("%d seats sold, %d tickets counted (%v), want both %d", sold, n, err, confirmed)
	}
}

// unreadableBuyers is a catalog whose buyer counts cannot be read, as
// while the database is down.
type unreadableBuyers struct{ booking.Store }

func (unreadableBuyers) BuyerTickets(context.Context, int64, string) (int64, error) {
	return 0, fmt.Errorf("test: %w", booking.ErrUnavailable)
}

// TestBuyerLimitDatabaseDown: holds go on while the buyer counts cannot be
// read, still bounded by the buyer limit in the hold store.
func TestBuyerLimitDatabaseDown(t *testing.T) {
	db, err := sqlitebooking.Open(context.Background(), filepath.Join(t.TempDir(), "booking.db"))
	if err != nil {
		t.Fatal(err)
	}
	r := newRigConfig(t, 10, unreadableBuyers{db}, nil, func(c *sale.Config) { c.BuyerLimit = 2 })
	ctx := context.Background()
	if _, err := r.svc.Hold(ctx, r.sched.ID, "v", r.seats[:2]); err != nil {
		t.Fatalf("two seats with the counts unreadable: %v", err)
	}
	if _, err := r.svc.Hold(ctx, r.sched.ID, "v", r.seats[2:3]); !errors.Is(err, sale.ErrBuyerLimit) {
		t.Errorf("a third seat: %v, want ErrBuyerLimit", err)
	}
}
