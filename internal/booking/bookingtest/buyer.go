package bookingtest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"usher/internal/booking"
)

// The buyer limit: a reservation with a BuyerLimit counts its tickets to
// its visitor for the schedule, with a conditional UPDATE in Decide's
// transaction, and is rejected (buyer_limit, nothing sold) beyond it.

// buying returns r for visitor with a buyer limit.
func buying(r booking.Reservation, visitor string, limit int64) booking.Reservation {
	r.Visitor, r.BuyerLimit = visitor, limit
	return r
}

func buyerTickets(tb testing.TB, s booking.Store, scheduleID int64, visitor string) int64 {
	tb.Helper()
	n, err := s.BuyerTickets(context.Background(), scheduleID, visitor)
	if err != nil {
		tb.Fatalf("BuyerTickets(%d, %s): %v", scheduleID, visitor, err)
	}
	return n
}

func testDecideBuyerLimit(t *testing.T, s booking.Store) {
	sch, ids := catalog(t, s, 20)
	other, otherIDs := catalog(t, s, 4)
	setStock(t, s, sch.ID, 10)
	const limit = 4

	// Tickets add up over reservations, seats and stock alike.
	r1 := buying(pending("b1", sch.ID, ids[0], ids[1]), "alice", limit)
	wantDecided(t, decide(t, s, r1)[0], r1, booking.Confirmed, "")
	r2 := buying(pending("b2", sch.ID, ids[2], ids[3], ids[4]), "alice", limit)
	wantDecided(t, decide(t, s, r2)[0], r2, booking.Rejected, booking.ReasonBuyerLimit)
	m := seatMap(t, s, sch.ID)
	for _, id := range ids[2:5] {
		wantSeat(t, m, id, booking.Available, "")
	}
	r3 := buying(pendingStock("b3", sch.ID, 2), "alice", limit)
	wantDecided(t, decide(t, s, r3)[0], r3, booking.Confirmed, "")
	r4 := buying(pending("b4", sch.ID, ids[2]), "alice", limit)
	wantDecided(t, decide(t, s, r4)[0], r4, booking.Rejected, booking.ReasonBuyerLimit)
	r5 := buying(pendingStock("b5", sch.ID, 1), "alice", limit)
	wantDecided(t, decide(t, s, r5)[0], r5, booking.Rejected, booking.ReasonBuyerLimit)
	if got := stock(t, s, sch.ID); got.Sold != 2 {
		t.Errorf("stock sold %d after a refused stock reservation, want 2", got.Sold)
	}
	if got := buyerTickets(t, s, sch.ID, "alice"); got != limit {
		t.Errorf("alice's tickets = %d, want %d", got, limit)
	}

	// A redelivery counts nothing again; a reservation without a limit is
	// not counted; the count is per schedule and per visitor.
	if got := decide(t, s, r1)[0]; got.Status != booking.Confirmed {
		t.Errorf("redelivered b1: %s %s", got.Status, got.Reason)
	}
	free := pending("b6", sch.ID, ids[5])
	free.Visitor = "alice"
	wantDecided(t, decide(t, s, free)[0], free, booking.Confirmed, "")
	o := buying(pending("b7", other.ID, otherIDs[0], otherIDs[1], otherIDs[2], otherIDs[3]), "alice", limit)
	wantDecided(t, decide(t, s, o)[0], o, booking.Confirmed, "")
	if got := buyerTickets(t, s, sch.ID, "alice"); got != limit {
		t.Errorf("alice's tickets after a redelivery, an unlimited and another schedule's reservation = %d, want %d", got, limit)
	}
	if got := buyerTickets(t, s, other.ID, "alice"); got != 4 {
		t.Errorf("alice's tickets of the other schedule = %d, want 4", got)
	}

	// A reservation rejected for another reason counts nothing.
	taken := buying(pending("b8", sch.ID, ids[0]), "bob", limit)
	wantDecided(t, decide(t, s, taken)[0], taken, booking.Rejected, booking.ReasonSeatTaken)
	partial := buying(pending("b9", sch.ID, ids[6], ids[1]), "bob", limit)
	wantDecided(t, decide(t, s, partial)[0], partial, booking.Rejected, booking.ReasonSeatTaken)
	if got := buyerTickets(t, s, sch.ID, "bob"); got != 0 {
		t.Errorf("bob's tickets after two rejected reservations = %d, want 0", got)
	}

	// In one batch, in order: carol's first two fit, the third does not;
	// an id twice is a redelivery, counted once.
	c1 := buying(pending("c1", sch.ID, ids[6], ids[7]), "carol", limit)
	c2 := buying(pending("c2", sch.ID, ids[8]), "carol", limit)
	c3 := buying(pending("c3", sch.ID, ids[9], ids[10]), "carol", limit)
	d1 := buying(pending("d1", sch.ID, ids[11]), "dan", limit)
	got := decide(t, s, c1, d1, c2, c2, c3)
	wantDecided(t, got[0], c1, booking.Confirmed, "")
	wantDecided(t, got[1], d1, booking.Confirmed, "")
	wantDecided(t, got[2], c2, booking.Confirmed, "")
	if got[3].Status != booking.Confirmed {
		t.Errorf("c2 twice in a batch: the second %s %s, want the first's decision", got[3].Status, got[3].Reason)
	}
	wantDecided(t, got[4], c3, booking.Rejected, booking.ReasonBuyerLimit)
	if n := buyerTickets(t, s, sch.ID, "carol"); n != 3 {
		t.Errorf("carol's tickets = %d, want 3", n)
	}
	m = seatMap(t, s, sch.ID)
	wantSeat(t, m, ids[9], booking.Available, "")
	wantSeat(t, m, ids[8], booking.Sold, "c2")
}

// testDecideBuyerConcurrent: one buyer's reservations of distinct seats,
// decided by many concurrent callers (single reservations and batches),
// never confirm more tickets than the limit, and confirm exactly the
// limit when enough were asked for.
func testDecideBuyerConcurrent(t *testing.T, s booking.Store) {
	const (
		workers = 16
		each    = 4 // reservations per worker
		limit   = 7
	)
	sch, ids := catalog(t, s, workers*each)
	var wg sync.WaitGroup
	var mu sync.Mutex
	confirmed := map[string]bool{}
	for w := range workers {
		wg.Go(func() {
			var rs []booking.Reservation
			for k := range each {
				i := w*each + k
				rs = append(rs, buying(pending(fmt.Sprintf("x%d", i), sch.ID, ids[i]), "eve", limit))
			}
			var got []booking.Reservation
			var err error
			if w%2 == 0 { // a batch
				got, err = s.Decide(context.Background(), rs)
			} else {
				for _, r := range rs {
					var one []booking.Reservation
					if one, err = s.Decide(context.Background(), []booking.Reservation{r}); err != nil {
						break
					}
					got = append(got, one...)
				}
			}
			if err != nil {
				t.Errorf("Decide: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range got {
				switch {
				case r.Status == booking.Confirmed:
					confirmed[r.ID] = true
				case r.Reason != booking.ReasonBuyerLimit:
					t.Errorf("%s: %s %s, want confirmed or buyer_limit (distinct seats)", r.ID, r.Status, r.Reason)
				}
			}
		})
	}
	wg.Wait()
	if len(confirmed) != limit {
		t.Errorf("%d reservations of one seat confirmed for one buyer, want the limit %d", len(confirmed), limit)
	}
	sold := 0
	for _, seat := range seats(t, s, sch.ID) {
		if seat.Status == booking.Sold {
			sold++
			if !confirmed[seat.ReservationID] {
				t.Errorf("seat %d sold to %s, which was not confirmed", seat.ID, seat.ReservationID)
			}
		}
	}
	if sold != limit {
		t.Errorf("%d seats sold, want %d", sold, limit)
	}
	if n := buyerTickets(t, s, sch.ID, "eve"); n != limit {
		t.Errorf("BuyerTickets = %d, want %d", n, limit)
	}
}
