package bookingtest

import (
	"context"
	"fmt"
	mathrand "math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"usher/internal/booking"
)

// testDecideConcurrent has 32 goroutines decide overlapping reservations of
// one to three seats among 200, in batches, some of them redeliveries (with
// other seats) of ids another goroutine decides at the same time. Afterwards
// no seat is sold twice, every confirmed reservation owns all its seats, no
// rejected one owns any, every answer for one id is the stored one, and the
// outbox holds exactly one event per stored reservation.
func testDecideConcurrent(t *testing.T, s booking.Store) {
	const (
		workers   = 32
		batches   = 6
		batchSize = 5
		nSeats    = 200
		shared    = 40 // ids every goroutine may deliver
	)
	ctx := context.Background()
	sch, ids := catalog(t, s, nSeats)

	var mu sync.Mutex
	answers := map[string][]booking.Reservation{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := mathrand.New(mathrand.NewPCG(uint64(w), 7))
			for b := range batches {
				batch := make([]booking.Reservation, batchSize)
				for i := range batch {
					id := fmt.Sprintf("w%d-b%d-%d", w, b, i)
					if rnd.IntN(4) == 0 {
						id = fmt.Sprintf("shared-%d", rnd.IntN(shared))
					}
					seats := make([]int64, 1+rnd.IntN(3))
					for j := range seats {
						seats[j] = ids[rnd.IntN(nSeats)]
					}
					batch[i] = pending(id, sch.ID, seats...)
				}
				got, err := s.Decide(ctx, batch)
				if err != nil {
					t.Errorf("worker %d: Decide: %v", w, err)
					return
				}
				if len(got) != len(batch) {
					t.Errorf("worker %d: Decide returned %d for %d", w, len(got), len(batch))
					return
				}
				mu.Lock()
				for i, r := range got {
					if r.ID != batch[i].ID {
						t.Errorf("worker %d: answer %d is %s, want %s (order kept)", w, i, r.ID, batch[i].ID)
					}
					answers[r.ID] = append(answers[r.ID], r)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	stored := map[string]booking.Reservation{}
	confirmedSeats := 0
	for id, rs := range answers {
		r, err := s.Reservation(ctx, id)
		if err != nil {
			t.Fatalf("Reservation(%s): %v", id, err)
		}
		for _, a := range rs {
			if diff := cmp.Diff(r, a); diff != "" {
				t.Errorf("an answer for %s differs from the stored decision (-stored +answer):\n%s", id, diff)
			}
		}
		if r.Status == booking.Confirmed {
			confirmedSeats += len(r.SeatIDs)
		}
		stored[id] = r
	}
	sold := 0
	m := seatMap(t, s, sch.ID)
	for _, seat := range m {
		switch seat.Status {
		case booking.Sold:
			sold++
			r, ok := stored[seat.ReservationID]
			if !ok || r.Status != booking.Confirmed || !slices.Contains(r.SeatIDs, seat.ID) {
				t.Errorf("seat %d sold to %q, which is not a confirmed reservation of it (%+v)", seat.ID, seat.ReservationID, r)
			}
		case booking.Available:
			if seat.ReservationID != "" {
				t.Errorf("available seat %d owned by %q", seat.ID, seat.ReservationID)
			}
		default:
			t.Errorf("seat %d status %s", seat.ID, seat.Status)
		}
	}
	confirmed, rejected := 0, 0
	for _, r := range stored {
		switch r.Status {
		case booking.Confirmed:
			confirmed++
			for _, id := range r.SeatIDs {
				if seat := m[id]; seat.Status != booking.Sold || seat.ReservationID != r.ID {
					t.Errorf("confirmed %s does not own seat %d (%s, %q)", r.ID, id, seat.Status, seat.ReservationID)
				}
			}
		case booking.Rejected:
			rejected++
			for _, id := range r.SeatIDs {
				if m[id].ReservationID == r.ID {
					t.Errorf("rejected %s owns seat %d", r.ID, id)
				}
			}
		default:
			t.Errorf("reservation %s stored as %s", r.ID, r.Status)
		}
	}
	if sold != confirmedSeats {
		t.Errorf("%d seats sold, confirmed reservations hold %d", sold, confirmedSeats)
	}
	// The test only means something if both outcomes happened often.
	if confirmed < 20 || rejected < 20 {
		t.Errorf("%d confirmed, %d rejected: want plenty of both", confirmed, rejected)
	}
	checkOutbox(t, s, stored)
	t.Logf("%d reservations: %d confirmed (%d seats), %d rejected", len(stored), confirmed, sold, rejected)
}
