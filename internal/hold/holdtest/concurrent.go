package holdtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"usher/internal/hold"
)

// ledger is the test's own record of the live seat holds. A caller enters a
// hold after HoldSeats succeeded and takes it out before it calls Release,
// so the ledger never lists a seat the store does not hold, nor more seats
// per holder: a seat entered twice, or a holder past the limit, is a real
// double booking by the store.
type ledger struct {
	mu      sync.Mutex
	owner   map[string]string // seat → hold id
	seatsOf map[string]int    // holder → seats
}

func (l *ledger) enter(h hold.Hold, limit int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, seat := range h.Seats {
		if id, ok := l.owner[seat]; ok {
			return fmt.Errorf("seat %s held by %s and by %s (%s) at once", seat, id, h.ID, h.Holder)
		}
		l.owner[seat] = h.ID
	}
	if l.seatsOf[h.Holder] += len(h.Seats); l.seatsOf[h.Holder] > limit {
		return fmt.Errorf("%s holds %d seats, limit %d", h.Holder, l.seatsOf[h.Holder], limit)
	}
	return nil
}

func (l *ledger) leave(h hold.Hold) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, seat := range h.Seats {
		delete(l.owner, seat)
	}
	l.seatsOf[h.Holder] -= len(h.Seats)
}

func (l *ledger) seats() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	seats := make([]string, 0, len(l.owner))
	for seat := range l.owner {
		seats = append(seats, seat)
	}
	slices.Sort(seats)
	return seats
}

// testConcurrentSeats has 64 callers, 8 holders shared among them, fight
// over 100 seats with requests of 1 to 4 seats, releasing some holds as they
// go, while an observer lists the held seats. No seat may be under two live
// holds, no holder past the limit, no failed request may leave a seat held,
// and no seat may be listed twice.
func testConcurrentSeats(t *testing.T, s hold.Store) {
	const (
		workers  = 64
		attempts = 150
		seats    = 100
		holders  = 8
		limit    = 6
	)
	ctx := context.Background()
	l := &ledger{owner: map[string]string{}, seatsOf: map[string]int{}}
	var held, taken, limited atomic.Int64
	var wg sync.WaitGroup
	done := make(chan struct{})
	observed := make(chan error, 1)
	go func() { // observer
		defer close(observed)
		for {
			select {
			case <-done:
				return
			default:
			}
			list, err := s.HeldSeats(ctx, "hot", t0)
			if err != nil {
				observed <- err
				return
			}
			slices.Sort(list)
			if d := slices.Compact(slices.Clone(list)); len(d) != len(list) {
				observed <- fmt.Errorf("HeldSeats lists a seat twice: %v", list)
				return
			}
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(42, uint64(w)))
			holder := fmt.Sprint("h", w%holders)
			var mine []hold.Hold
			for range attempts {
				if len(mine) > 0 && rnd.IntN(3) == 0 {
					i := rnd.IntN(len(mine))
					h := mine[i]
					mine = slices.Delete(mine, i, i+1)
					l.leave(h)
					if err := s.Release(ctx, "hot", h.ID, t0); err != nil {
						t.Errorf("Release(%s): %v", h.ID, err)
						return
					}
					continue
				}
				want := make([]string, 0, 4)
				for _, i := range rnd.Perm(seats)[:1+rnd.IntN(4)] {
					want = append(want, fmt.Sprint("s", i))
				}
				h, err := s.HoldSeats(ctx, "hot", holder, want, limit, time.Hour, t0)
				var te *hold.TakenError
				switch {
				case err == nil:
					held.Add(1)
					if !slices.Equal(h.Seats, want) {
						t.Errorf("HoldSeats(%v) held %v", want, h.Seats)
						return
					}
					if err := l.enter(h, limit); err != nil {
						t.Error(err)
						return
					}
					mine = append(mine, h)
				case errors.As(err, &te):
					taken.Add(1)
					if len(te.Seats) == 0 || len(te.Seats) > len(want) {
						t.Errorf("HoldSeats(%v): taken seats %v", want, te.Seats)
						return
					}
					for _, seat := range te.Seats {
						if !slices.Contains(want, seat) {
							t.Errorf("HoldSeats(%v): taken seats %v name a seat not asked for", want, te.Seats)
							return
						}
					}
				case errors.Is(err, hold.ErrLimit):
					limited.Add(1)
				default:
					t.Errorf("HoldSeats(%v): %v", want, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	if err := <-observed; err != nil {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	// Quiet now: the store holds exactly what the successful requests took.
	if got, want := heldSeats(t, s, "hot", t0), l.seats(); !slices.Equal(got, want) {
		t.Errorf("HeldSeats = %v,\nwant the ledger's %v", got, want)
	}
	if held.Load() == 0 || taken.Load() == 0 || limited.Load() == 0 {
		t.Errorf("held %d, taken %d, limited %d: want contention on every path", held.Load(), taken.Load(), limited.Load())
	}
	t.Logf("held %d, taken %d, limited %d", held.Load(), taken.Load(), limited.Load())
}

// race starts n goroutines at once and waits for them.
func race(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}

// testConcurrentStock: 1000 callers take one unit each of 100.
func testConcurrentStock(t *testing.T, s hold.Store) {
	const callers, units = 1000, 100
	ctx := context.Background()
	mustSetStock(t, s, "ga", units)
	var ok, soldOut atomic.Int64
	race(callers, func(i int) {
		_, err := s.HoldStock(ctx, "ga", fmt.Sprint("h", i), 1, 1, ttl, t0)
		switch {
		case err == nil:
			ok.Add(1)
		case errors.Is(err, hold.ErrSoldOut):
			soldOut.Add(1)
		default:
			t.Errorf("HoldStock: %v", err)
		}
	})
	if ok.Load() != units || soldOut.Load() != callers-units {
		t.Errorf("%d held, %d sold out, want %d and %d", ok.Load(), soldOut.Load(), units, callers-units)
	}
	wantStock(t, s, "ga", t0, 0)
}

// testConcurrentStockLimit: 100 callers for one holder, limit 5.
func testConcurrentStockLimit(t *testing.T, s hold.Store) {
	const callers, limit = 100, 5
	ctx := context.Background()
	mustSetStock(t, s, "ga", 1000)
	var ok, limited atomic.Int64
	race(callers, func(int) {
		_, err := s.HoldStock(ctx, "ga", "alice", 1, limit, ttl, t0)
		switch {
		case err == nil:
			ok.Add(1)
		case errors.Is(err, hold.ErrLimit):
			limited.Add(1)
		default:
			t.Errorf("HoldStock: %v", err)
		}
	})
	if ok.Load() != limit || limited.Load() != callers-limit {
		t.Errorf("%d held, %d limited, want %d and %d", ok.Load(), limited.Load(), limit, callers-limit)
	}
	wantStock(t, s, "ga", t0, 1000-limit)
}

// testConcurrentStockChurn has 32 callers take and release 1 to 3 units of
// 50 while an observer reads the stock: it never leaves 0 to 50, and in the
// end the units left plus the units held are the 50.
func testConcurrentStockChurn(t *testing.T, s hold.Store) {
	const (
		workers  = 32
		attempts = 100
		units    = 50
	)
	ctx := context.Background()
	mustSetStock(t, s, "ga", units)
	var soldOut atomic.Int64
	var mu sync.Mutex
	var live []hold.Hold
	done := make(chan struct{})
	observed := make(chan error, 1)
	go func() {
		defer close(observed)
		for {
			select {
			case <-done:
				return
			default:
			}
			n, err := s.Stock(ctx, "ga", t0)
			if err == nil && (n < 0 || n > units) {
				err = fmt.Errorf("Stock = %d, want 0 to %d", n, units)
			}
			if err != nil {
				observed <- err
				return
			}
		}
	}()
	race(workers, func(w int) {
		rnd := rand.New(rand.NewPCG(7, uint64(w)))
		var mine []hold.Hold
		for range attempts {
			if len(mine) > 0 && rnd.IntN(3) == 0 {
				h := mine[len(mine)-1]
				mine = mine[:len(mine)-1]
				if err := s.Release(ctx, "ga", h.ID, t0); err != nil {
					t.Errorf("Release: %v", err)
					return
				}
				continue
			}
			h, err := s.HoldStock(ctx, "ga", fmt.Sprint("h", w), 1+int64(rnd.IntN(3)), units, ttl, t0)
			switch {
			case err == nil:
				mine = append(mine, h)
			case errors.Is(err, hold.ErrSoldOut):
				soldOut.Add(1)
			default:
				t.Errorf("HoldStock: %v", err)
				return
			}
		}
		mu.Lock()
		live = append(live, mine...)
		mu.Unlock()
	})
	close(done)
	if err := <-observed; err != nil {
		t.Error(err)
	}
	var held int64
	for _, h := range live {
		held += h.Quantity
	}
	wantStock(t, s, "ga", t0, units-held)
	if soldOut.Load() == 0 {
		t.Error("no HoldStock was sold out: want contention")
	}
	for _, h := range live {
		mustRelease(t, s, "ga", h.ID, t0)
	}
	wantStock(t, s, "ga", t0, units)
}

// testConcurrentEnd races Release and Consume of one hold: exactly one call
// ends it, and the units come back only if that was a Release.
func testConcurrentEnd(t *testing.T, s hold.Store) {
	ctx := context.Background()
	for round := range 10 {
		scope := fmt.Sprint("ga", round)
		mustSetStock(t, s, scope, 10)
		h := mustHoldStock(t, s, scope, "alice", 3, 3, ttl, t0)
		var released, consumed, notFound atomic.Int64
		race(20, func(i int) {
			var err error
			if i%2 == 0 {
				if err = s.Release(ctx, scope, h.ID, t0); err == nil {
					released.Add(1)
				}
			} else if err = s.Consume(ctx, scope, h.ID, t0); err == nil {
				consumed.Add(1)
			}
			if errors.Is(err, hold.ErrNotFound) {
				notFound.Add(1)
			} else if err != nil {
				t.Errorf("end: %v", err)
			}
		})
		if released.Load()+consumed.Load() != 1 || notFound.Load() != 19 {
			t.Fatalf("released %d, consumed %d, not found %d: want one end and 19 not found",
				released.Load(), consumed.Load(), notFound.Load())
		}
		want := int64(7)
		if released.Load() == 1 {
			want = 10
		}
		wantStock(t, s, scope, t0, want)
	}
}
