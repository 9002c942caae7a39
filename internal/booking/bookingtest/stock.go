package bookingtest

import (
	"context"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"usher/internal/booking"
)

// The stock cases: general-admission units sold by Decide's conditional
// UPDATE of the schedule's stock row.

// pendingStock returns a pending reservation of n stock units.
func pendingStock(id string, scheduleID, n int64) booking.Reservation {
	r := pending(id, scheduleID)
	r.Quantity = n
	return r
}

func stock(tb testing.TB, s booking.Store, scheduleID int64) booking.Stock {
	tb.Helper()
	st, err := s.Stock(context.Background(), scheduleID)
	if err != nil {
		tb.Fatalf("Stock(%d): %v", scheduleID, err)
	}
	return st
}

func setStock(tb testing.TB, s booking.Store, scheduleID, total int64) {
	tb.Helper()
	if err := s.SetStock(context.Background(), scheduleID, total); err != nil {
		tb.Fatalf("SetStock(%d, %d): %v", scheduleID, total, err)
	}
}

func testStock(t *testing.T, s booking.Store) {
	ctx := context.Background()
	sch, _ := catalog(t, s, 0)
	if _, err := s.Stock(ctx, sch.ID); !errors.Is(err, booking.ErrNotFound) {
		t.Errorf("Stock of a schedule without stock: err = %v, want ErrNotFound", err)
	}
	if err := s.SetStock(ctx, sch.ID+1000, 10); !errors.Is(err, booking.ErrNotFound) {
		t.Errorf("SetStock(unknown schedule) err = %v, want ErrNotFound", err)
	}
	if err := s.SetStock(ctx, sch.ID, -1); !errors.Is(err, booking.ErrInvalid) {
		t.Errorf("SetStock(-1) err = %v, want ErrInvalid", err)
	}
	setStock(t, s, sch.ID, 10)
	if got, want := stock(t, s, sch.ID), (booking.Stock{Total: 10}); got != want {
		t.Errorf("Stock = %+v, want %+v", got, want)
	}
	setStock(t, s, sch.ID, 20)
	if got, want := stock(t, s, sch.ID), (booking.Stock{Total: 20}); got != want {
		t.Errorf("Stock after raising the total = %+v, want %+v", got, want)
	}
}

func testDecideStock(t *testing.T, s booking.Store) {
	ctx := context.Background()
	sch, ids := catalog(t, s, 2)
	setStock(t, s, sch.ID, 10)

	r := pendingStock("ga1", sch.ID, 3)
	got := decide(t, s, r)[0]
	wantDecided(t, got, r, booking.Confirmed, "")
	if got, want := stock(t, s, sch.ID), (booking.Stock{Total: 10, Sold: 3}); got != want {
		t.Errorf("Stock after selling 3 = %+v, want %+v", got, want)
	}
	stored, err := s.Reservation(ctx, "ga1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, stored); diff != "" {
		t.Errorf("Reservation(ga1) mismatch (-decided +read):\n%s", diff)
	}

	// More than is left: rejected, nothing sold.
	big := pendingStock("ga2", sch.ID, 8)
	wantDecided(t, decide(t, s, big)[0], big, booking.Rejected, booking.ReasonSoldOut)
	if got, want := stock(t, s, sch.ID), (booking.Stock{Total: 10, Sold: 3}); got != want {
		t.Errorf("Stock after a sold-out reservation = %+v, want %+v", got, want)
	}
	// Exactly what is left, in a batch with a seat reservation.
	rest, seat := pendingStock("ga3", sch.ID, 7), pending("seat", sch.ID, ids[0])
	got2 := decide(t, s, rest, seat)
	wantDecided(t, got2[0], rest, booking.Confirmed, "")
	wantDecided(t, got2[1], seat, booking.Confirmed, "")
	wantSeat(t, seatMap(t, s, sch.ID), ids[0], booking.Sold, "seat")
	if got, want := stock(t, s, sch.ID), (booking.Stock{Total: 10, Sold: 10}); got != want {
		t.Errorf("Stock after selling out = %+v, want %+v", got, want)
	}
	one := pendingStock("ga4", sch.ID, 1)
	wantDecided(t, decide(t, s, one)[0], one, booking.Rejected, booking.ReasonSoldOut)

	// A total below the units sold is refused and changes nothing.
	if err := s.SetStock(ctx, sch.ID, 9); !errors.Is(err, booking.ErrBelowSold) || !errors.Is(err, booking.ErrInvalid) {
		t.Errorf("SetStock below sold: err = %v, want ErrBelowSold (an ErrInvalid)", err)
	}
	setStock(t, s, sch.ID, 12)
	if got, want := stock(t, s, sch.ID), (booking.Stock{Total: 12, Sold: 10}); got != want {
		t.Errorf("Stock after raising the total = %+v, want %+v", got, want)
	}

	// No stock in the schedule, a negative quantity, seats and a quantity:
	// rejected as sold out, nothing sold.
	other, _ := catalog(t, s, 0)
	withSeats := pendingStock("both", sch.ID, 1)
	withSeats.SeatIDs = []int64{ids[1]}
	for _, r := range []booking.Reservation{
		pendingStock("nostock", other.ID, 1),
		pendingStock("negative", sch.ID, -1),
		withSeats,
	} {
		wantDecided(t, decide(t, s, r)[0], r, booking.Rejected, booking.ReasonSoldOut)
	}
	wantSeat(t, seatMap(t, s, sch.ID), ids[1], booking.Available, "")
	if got, want := stock(t, s, sch.ID), (booking.Stock{Total: 12, Sold: 10}); got != want {
		t.Errorf("Stock after malformed reservations = %+v, want %+v", got, want)
	}
}

func testDecideStockRedelivery(t *testing.T, s booking.Store) {
	sch, _ := catalog(t, s, 0)
	setStock(t, s, sch.ID, 5)
	ok := decide(t, s, pendingStock("ok", sch.ID, 2))[0]
	no := decide(t, s, pendingStock("no", sch.ID, 4))[0]
	if ok.Status != booking.Confirmed || no.Status != booking.Rejected {
		t.Fatalf("setup: ok %s, no %s", ok.Status, no.Status)
	}
	// Redelivered (with other quantities that would fit), in a batch with a
	// new one and a second delivery of the new one.
	again := []booking.Reservation{
		pendingStock("ok", sch.ID, 1),
		pendingStock("no", sch.ID, 1),
		pendingStock("new", sch.ID, 3),
		pendingStock("new", sch.ID, 1),
	}
	got := decide(t, s, again...)
	if diff := cmp.Diff(ok, got[0]); diff != "" {
		t.Errorf("redelivered confirmed reservation: want the stored decision (-stored +got):\n%s", diff)
	}
	if diff := cmp.Diff(no, got[1]); diff != "" {
		t.Errorf("redelivered rejected reservation: want the stored decision (-stored +got):\n%s", diff)
	}
	wantDecided(t, got[2], again[2], booking.Confirmed, "")
	if diff := cmp.Diff(got[2], got[3]); diff != "" {
		t.Errorf("second delivery in the same batch: want the first's decision (-first +second):\n%s", diff)
	}
	if got, want := stock(t, s, sch.ID), (booking.Stock{Total: 5, Sold: 5}); got != want {
		t.Errorf("Stock = %+v, want %+v", got, want)
	}
}

// testDecideStockConcurrent has 20 goroutines decide 1-unit reservations of
// two schedules' stock (50 units each), in batches mixing both, more than
// twice what is for sale: exactly 50 are confirmed per schedule, and the
// stock agrees.
func testDecideStockConcurrent(t *testing.T, s booking.Store) {
	const (
		workers   = 20
		batches   = 4
		batchSize = 3
		total     = 50
	)
	ctx := context.Background()
	a, _ := catalog(t, s, 0)
	b, _ := catalog(t, s, 0)
	setStock(t, s, a.ID, total)
	setStock(t, s, b.ID, total)

	var mu sync.Mutex
	confirmed := map[int64]int{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rnd := mathrand.New(mathrand.NewPCG(uint64(w), 11))
			for i := range batches {
				batch := make([]booking.Reservation, batchSize)
				for j := range batch {
					sch := a.ID
					if rnd.IntN(2) == 0 {
						sch = b.ID
					}
					batch[j] = pendingStock(fmt.Sprintf("w%d-b%d-%d", w, i, j), sch, 1)
				}
				got, err := s.Decide(ctx, batch)
				if err != nil {
					t.Errorf("worker %d: Decide: %v", w, err)
					return
				}
				mu.Lock()
				for _, r := range got {
					switch {
					case r.Status == booking.Confirmed:
						confirmed[r.ScheduleID]++
					case r.Status != booking.Rejected || r.Reason != booking.ReasonSoldOut:
						t.Errorf("reservation %s: %s %q, want confirmed or sold out", r.ID, r.Status, r.Reason)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, id := range []int64{a.ID, b.ID} {
		if confirmed[id] != total {
			t.Errorf("schedule %d: %d confirmed, want %d", id, confirmed[id], total)
		}
		if got, want := stock(t, s, id), (booking.Stock{Total: total, Sold: total}); got != want {
			t.Errorf("Stock(%d) = %+v, want %+v", id, got, want)
		}
	}
}
