package sale_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"usher/internal/booking"
	"usher/internal/hold"
	"usher/internal/hold/memhold"
	"usher/internal/hold/redishold"
	"usher/internal/sale"
	"usher/internal/testenv"
)

// hasStock checks SQL's and the hold store's view of the rig's stock.
func (r *rig) hasStock(t *testing.T, total, sold, left int64) {
	t.Helper()
	ctx := context.Background()
	st, err := r.catalog.Stock(ctx, r.sched.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := (booking.Stock{Total: total, Sold: sold}); st != want {
		t.Errorf("SQL stock = %+v, want %+v", st, want)
	}
	got, err := r.svc.Stock(ctx, r.sched.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got != left {
		t.Errorf("hold store stock = %d, want %d", got, left)
	}
}

func TestStockFlow(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, 1)
	lvl, err := r.svc.SetStock(ctx, r.sched.ID, 10)
	if err != nil || lvl != (sale.StockLevel{ScheduleID: r.sched.ID, Total: 10, Available: 10}) {
		t.Fatalf("SetStock = %+v, %v", lvl, err)
	}
	h, err := r.svc.HoldStock(ctx, r.sched.ID, "alice", 2)
	if err != nil || h.Quantity != 2 {
		t.Fatalf("HoldStock = %+v, %v; want 2 units", h, err)
	}
	r.hasStock(t, 10, 0, 8)

	// Someone else's hold, a seat hold, a malformed hold id: refused.
	if _, _, err := r.svc.ReserveStock(ctx, "bob", r.sched.ID, h.ID, "k"); !errors.Is(err, hold.ErrNotFound) {
		t.Errorf("bob reserves alice's hold: err = %v, want hold not found", err)
	}
	seatHold, err := r.svc.Hold(ctx, r.sched.ID, "alice", r.seats[:1])
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.svc.ReserveStock(ctx, "alice", r.sched.ID, seatHold.ID, "k"); !errors.Is(err, sale.ErrInvalid) {
		t.Errorf("reserve a seat hold as stock: err = %v, want invalid", err)
	}
	if _, _, err := r.svc.ReserveStock(ctx, "alice", r.sched.ID, "no such", "k"); !errors.Is(err, sale.ErrInvalid) {
		t.Errorf("reserve hold id %q: err = %v, want invalid", "no such", err)
	}

	res, created, err := r.svc.ReserveStock(ctx, "alice", r.sched.ID, h.ID, "k")
	if err != nil || !created || res.Quantity != 2 || res.Status != booking.Pending {
		t.Fatalf("ReserveStock = %+v, %v, %v; want a new pending reservation of 2", res, created, err)
	}
	// The same hold under another key is the same reservation, or, once the
	// consumer has already ended the hold, no reservation: its units cannot
	// be bought twice (hasStock below checks SQL sold only 2).
	if dup, _, err := r.svc.ReserveStock(ctx, "alice", r.sched.ID, h.ID, "k-other"); !(err == nil && dup.ID == res.ID) && !errors.Is(err, hold.ErrNotFound) {
		t.Errorf("the same hold under another key = %+v, %v; want reservation %s or hold not found", dup, err, res.ID)
	}
	decided := r.wait(t, "alice", res.ID)
	if decided.Status != booking.Confirmed || decided.Quantity != 2 {
		t.Fatalf("reservation = %+v, want confirmed for 2", decided)
	}
	r.hasStock(t, 10, 2, 8) // consumed: the units stay sold
	if _, err := r.holds.Get(ctx, sale.Scope(r.sched.ID), h.ID, time.Now()); !errors.Is(err, hold.ErrNotFound) {
		t.Errorf("stock hold after confirmation: err = %v, want ended", err)
	}
	// A retry with the same key is the same reservation, after the hold ended.
	again, created, err := r.svc.ReserveStock(ctx, "alice", r.sched.ID, h.ID, "k")
	if err != nil || created || again.ID != res.ID {
		t.Errorf("retry = %+v, %v, %v; want reservation %s again", again, created, err, res.ID)
	}

	// The per-visitor limit (4) and sold out.
	if _, err := r.svc.HoldStock(ctx, r.sched.ID, "carol", 5); !errors.Is(err, hold.ErrLimit) {
		t.Errorf("hold 5 units: err = %v, want the limit", err)
	}
	if _, err := r.svc.HoldStock(ctx, r.sched.ID, "carol", 0); !errors.Is(err, sale.ErrInvalid) {
		t.Errorf("hold 0 units: err = %v, want invalid", err)
	}
	for i := range 2 {
		if _, err := r.svc.HoldStock(ctx, r.sched.ID, fmt.Sprintf("d%d", i), 4); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.svc.HoldStock(ctx, r.sched.ID, "erin", 1); !errors.Is(err, hold.ErrSoldOut) {
		t.Errorf("hold with nothing left: err = %v, want sold out", err)
	}
	// A total below the units sold is refused; raising it frees units.
	if _, err := r.svc.SetStock(ctx, r.sched.ID, 1); !errors.Is(err, booking.ErrInvalid) {
		t.Errorf("SetStock below sold: err = %v, want invalid", err)
	}
	if _, err := r.svc.SetStock(ctx, 12345, 1); !errors.Is(err, booking.ErrNotFound) {
		t.Errorf("SetStock of an unknown schedule: err = %v, want not found", err)
	}
}

// TestStockNoOversell has 100 visitors race to hold and reserve one unit
// of 30: exactly 30 are confirmed, and SQL and the hold store agree. Then
// the hold store is made wrong (it believes 20 units are left): every
// reservation is rejected as sold out by SQL and its hold released.
func TestStockNoOversell(t *testing.T) {
	ctx := context.Background()
	const total, visitors = 30, 100
	r := newRig(t, 1)
	if _, err := r.svc.SetStock(ctx, r.sched.ID, total); err != nil {
		t.Fatal(err)
	}
	race := func(prefix string, n int) (confirmed, rejected int) {
		t.Helper()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for v := range n {
			wg.Go(func() {
				visitor := fmt.Sprintf("%s%d", prefix, v)
				h, err := r.svc.HoldStock(ctx, r.sched.ID, visitor, 1)
				if errors.Is(err, hold.ErrSoldOut) {
					return
				} else if err != nil {
					t.Errorf("hold: %v", err)
					return
				}
				res, _, err := r.svc.ReserveStock(ctx, visitor, r.sched.ID, h.ID, "k")
				if err != nil {
					t.Errorf("reserve: %v", err)
					return
				}
				res = r.wait(t, visitor, res.ID)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case res.Status == booking.Confirmed:
					confirmed++
				case res.Reason == booking.ReasonSoldOut:
					rejected++
				default:
					t.Errorf("%s: %s %q", res.ID, res.Status, res.Reason)
				}
			})
		}
		wg.Wait()
		return confirmed, rejected
	}
	if confirmed, rejected := race("v", visitors); confirmed != total || rejected != 0 {
		t.Errorf("%d confirmed, %d rejected; want %d and 0", confirmed, rejected, total)
	}
	r.hasStock(t, total, total, 0)

	// The hold store is wrong: SQL is the last line.
	if err := r.holds.SetStock(ctx, sale.Scope(r.sched.ID), 20); err != nil {
		t.Fatal(err)
	}
	if confirmed, rejected := race("w", 20); confirmed != 0 || rejected != 20 {
		t.Errorf("with a wrong hold store: %d confirmed, %d rejected; want 0 and 20", confirmed, rejected)
	}
	r.hasStock(t, total, total, 20) // rejected: the holds were released
}

// TestRebuildStock restarts the booking flow on a hold store that forgot
// the stock (memory after a restart, Redis after a flush): RebuildStock
// gives it back SQL's unsold units, logs it, skips sold-out and seat-only
// schedules, and leaves a hold store that still knows its level alone.
func TestRebuildStock(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, 1)
	if _, err := r.svc.SetStock(ctx, r.sched.ID, 10); err != nil {
		t.Fatal(err)
	}
	h, err := r.svc.HoldStock(ctx, r.sched.ID, "alice", 2)
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := r.svc.ReserveStock(ctx, "alice", r.sched.ID, h.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.wait(t, "alice", res.ID); got.Status != booking.Confirmed {
		t.Fatalf("reservation = %+v, want confirmed", got)
	}
	soldOut, err := r.svc.CreateSchedule(ctx, booking.Schedule{ConcertID: r.sched.ConcertID}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.catalog.SetStock(ctx, soldOut.ID, 0); err != nil {
		t.Fatal(err)
	}

	// The running hold store knows its level (8, 3 of them held now): kept.
	if _, err := r.svc.HoldStock(ctx, r.sched.ID, "bob", 3); err != nil {
		t.Fatal(err)
	}
	if err := r.svc.RebuildStock(ctx); err != nil {
		t.Fatal(err)
	}
	r.hasStock(t, 10, 2, 5)

	stores := map[string]func(t *testing.T) hold.Store{
		"memory": func(*testing.T) hold.Store { return memhold.New() },
		"redis": func(t *testing.T) hold.Store {
			c := testenv.Redis(t)
			return redishold.New(c, testenv.RedisPrefix(t, c))
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			var logs strings.Builder
			svc := sale.New(sale.Config{
				Catalog: r.catalog, Holds: open(t), Broker: r.broker, Queue: r.q,
				Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			})
			if got, err := svc.Stock(ctx, r.sched.ID); err != nil || got != 0 {
				t.Fatalf("before the rebuild: stock = %d, %v; want 0", got, err)
			}
			if err := svc.RebuildStock(ctx); err != nil {
				t.Fatal(err)
			}
			for id, want := range map[int64]int64{r.sched.ID: 8, soldOut.ID: 0} {
				if got, err := svc.Stock(ctx, id); err != nil || got != want {
					t.Errorf("schedule %d after the rebuild: stock = %d, %v; want %d", id, got, err, want)
				}
			}
			if got, want := strings.Count(logs.String(), "rebuilt general-admission stock"), 1; got != want {
				t.Errorf("%d rebuild lines logged, want %d:\n%s", got, want, logs.String())
			}
		})
	}
}
