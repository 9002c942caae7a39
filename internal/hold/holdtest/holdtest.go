// Package holdtest is the conformance suite that every hold.Store backend
// runs: Run for semantics, Bench for speed. It pins what booking relies on: a
// seat hold takes all of its seats or none, a seat is under at most one live
// hold at any moment (also under 64 concurrent callers), holds end exactly at
// their expiry by the caller's clock (the suite moves the clock, it never
// sleeps), per-holder limits count only live holds, stock is an atomic
// check-and-decrement that never oversells, and the errors a backend returns.
//
// Where hold.Store's contract is silent it pins choices every backend must
// share (a seat named twice is taken, the goods are checked before the limit,
// the limit is inclusive, ids are per scope, and more), listed in
// docs/architecture.md#the-hold-store. Not pinned, because the caller
// validates them: empty seat lists, n or ttl of zero or less, negative stock
// or limits, ids that break hold.Store's rules.
package holdtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"usher/internal/hold"
)

// NewStore returns an empty store for one test. Scopes only need to be
// unique within that store; backends sharing a server use a fresh prefix.
type NewStore func(t testing.TB) hold.Store

// t0 is the suite's clock origin, on a whole millisecond so that backends
// with millisecond resolution give the same expiries.
var t0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

// ttl is the hold duration the suite uses unless a test says otherwise.
const ttl = 10 * time.Minute

// Run runs the conformance suite against stores made by newStore. The
// tests run in parallel, each on a store of its own: newStore must make
// independent stores, and release them with tb.Cleanup, not after Run
// returns (parallel subtests run after it).
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(*testing.T, hold.Store)
	}{
		{"HoldSeats", testHoldSeats},
		{"UniqueIDs", testUniqueIDs},
		{"TakenAllOrNone", testTakenAllOrNone},
		{"DuplicateSeats", testDuplicateSeats},
		{"SeatExpiry", testSeatExpiry},
		{"Release", testRelease},
		{"Find", testFind},
		{"NotFound", testNotFound},
		{"SeatLimit", testSeatLimit},
		{"ErrorPrecedence", testErrorPrecedence},
		{"Scopes", testScopes},
		{"Stock", testStock},
		{"StockLimit", testStockLimit},
		{"StockExpiry", testStockExpiry},
		{"SetStockKeepsHolds", testSetStockKeepsHolds},
		{"ConsumeStock", testConsumeStock},
		{"ConsumeSeats", testConsumeSeats},
		{"ConcurrentSeats", testConcurrentSeats},
		{"ConcurrentStock", testConcurrentStock},
		{"ConcurrentStockLimit", testConcurrentStockLimit},
		{"ConcurrentStockChurn", testConcurrentStockChurn},
		{"ConcurrentEnd", testConcurrentEnd},
		{"Lapsed", testLapsed},
		{"ConcurrentLapsed", testConcurrentLapsed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each test has a store of its own
			tt.fn(t, newStore(t))
		})
	}
}

func mustHoldSeats(t testing.TB, s hold.Store, scope, holder string, seats []string, limit int, ttl time.Duration, now time.Time) hold.Hold {
	t.Helper()
	h, err := s.HoldSeats(context.Background(), scope, holder, seats, limit, ttl, now)
	if err != nil {
		t.Fatalf("HoldSeats(%s, %s, %v): %v", scope, holder, seats, err)
	}
	return h
}

func mustHoldStock(t testing.TB, s hold.Store, scope, holder string, n, limit int64, ttl time.Duration, now time.Time) hold.Hold {
	t.Helper()
	h, err := s.HoldStock(context.Background(), scope, holder, n, limit, ttl, now)
	if err != nil {
		t.Fatalf("HoldStock(%s, %s, %d): %v", scope, holder, n, err)
	}
	return h
}

func mustSetStock(t testing.TB, s hold.Store, scope string, total int64) {
	t.Helper()
	if err := s.SetStock(context.Background(), scope, total); err != nil {
		t.Fatalf("SetStock(%s, %d): %v", scope, total, err)
	}
}

func mustRelease(t testing.TB, s hold.Store, scope, id string, now time.Time) {
	t.Helper()
	if err := s.Release(context.Background(), scope, id, now); err != nil {
		t.Fatalf("Release(%s, %s): %v", scope, id, err)
	}
}

func mustConsume(t testing.TB, s hold.Store, scope, id string, now time.Time) {
	t.Helper()
	if err := s.Consume(context.Background(), scope, id, now); err != nil {
		t.Fatalf("Consume(%s, %s): %v", scope, id, err)
	}
}

// heldSeats returns HeldSeats sorted.
func heldSeats(t testing.TB, s hold.Store, scope string, now time.Time) []string {
	t.Helper()
	seats, err := s.HeldSeats(context.Background(), scope, now)
	if err != nil {
		t.Fatalf("HeldSeats(%s): %v", scope, err)
	}
	slices.Sort(seats)
	return seats
}

func wantHeld(t testing.TB, s hold.Store, scope string, now time.Time, want ...string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	if got := heldSeats(t, s, scope, now); !slices.Equal(got, want) {
		t.Errorf("HeldSeats(%s) = %v, want %v", scope, got, want)
	}
}

func wantStock(t testing.TB, s hold.Store, scope string, now time.Time, want int64) {
	t.Helper()
	got, err := s.Stock(context.Background(), scope, now)
	if err != nil {
		t.Fatalf("Stock(%s): %v", scope, err)
	}
	if got != want {
		t.Errorf("Stock(%s) = %d, want %d", scope, got, want)
	}
}

// wantErr checks that err is target, wrapped, and nothing else the store
// defines.
func wantErr(t testing.TB, op string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: err = %v, want %v", op, err, target)
		return
	}
	for _, other := range []error{hold.ErrNotFound, hold.ErrTaken, hold.ErrLimit, hold.ErrSoldOut, hold.ErrUnavailable} {
		if other != target && errors.Is(err, other) {
			t.Errorf("%s: err = %v is also %v", op, err, other)
		}
	}
}

// wantTaken checks that err is a *TakenError listing exactly seats.
func wantTaken(t testing.TB, op string, err error, seats ...string) {
	t.Helper()
	wantErr(t, op, err, hold.ErrTaken)
	var te *hold.TakenError
	if !errors.As(err, &te) {
		t.Errorf("%s: err = %v (%T), want a *hold.TakenError", op, err, err)
		return
	}
	if !slices.Equal(te.Seats, seats) {
		t.Errorf("%s: taken seats = %q, want %q", op, te.Seats, seats)
	}
}

func wantNotFound(t testing.TB, s hold.Store, scope, id string, now time.Time) {
	t.Helper()
	ctx := context.Background()
	_, err := s.Get(ctx, scope, id, now)
	wantErr(t, "Get", err, hold.ErrNotFound)
	wantErr(t, "Release", s.Release(ctx, scope, id, now), hold.ErrNotFound)
	wantErr(t, "Consume", s.Consume(ctx, scope, id, now), hold.ErrNotFound)
}

// diffHold compares holds; ExpiresAt by time.Time.Equal, nil and empty
// seat lists alike.
func diffHold(got, want hold.Hold) string {
	return cmp.Diff(want, got, cmpopts.EquateEmpty())
}

func mustGet(t testing.TB, s hold.Store, scope, id string, now time.Time) hold.Hold {
	t.Helper()
	h, err := s.Get(context.Background(), scope, id, now)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", scope, id, err)
	}
	return h
}

func testHoldSeats(t *testing.T, s hold.Store) {
	seats := []string{"B-7", "A-1", "C-12"}
	h := mustHoldSeats(t, s, "show", "alice", seats, 10, ttl, t0)
	if h.ID == "" {
		t.Fatal("hold has no id")
	}
	want := hold.Hold{ID: h.ID, Scope: "show", Holder: "alice", Seats: []string{"B-7", "A-1", "C-12"}, ExpiresAt: t0.Add(ttl)}
	if d := diffHold(h, want); d != "" {
		t.Errorf("HoldSeats returned (-want +got):\n%s", d)
	}
	seats[0] = "Z-99" // the store keeps its own copy
	if d := diffHold(mustGet(t, s, "show", h.ID, t0.Add(time.Minute)), want); d != "" {
		t.Errorf("Get (-want +got):\n%s", d)
	}
	wantHeld(t, s, "show", t0, "A-1", "B-7", "C-12")
	wantHeld(t, s, "empty", t0)
}

func testUniqueIDs(t *testing.T, s hold.Store) {
	mustSetStock(t, s, "show", 100)
	ids := map[string]bool{}
	for i := range 50 {
		for _, h := range []hold.Hold{
			mustHoldSeats(t, s, "show", "alice", []string{fmt.Sprint("s", i)}, 100, ttl, t0),
			mustHoldStock(t, s, "show", "alice", 1, 100, ttl, t0),
		} {
			if ids[h.ID] {
				t.Fatalf("id %q issued twice", h.ID)
			}
			ids[h.ID] = true
		}
	}
}

func testTakenAllOrNone(t *testing.T, s hold.Store) {
	ctx := context.Background()
	first := mustHoldSeats(t, s, "show", "alice", []string{"s1", "s2", "s3"}, 10, ttl, t0)
	now := t0.Add(time.Minute)

	_, err := s.HoldSeats(ctx, "show", "bob", []string{"s0", "s3", "s4", "s1"}, 10, ttl, now)
	wantTaken(t, "HoldSeats overlapping another holder", err, "s3", "s1")
	// The same holder does not get a seat twice either.
	_, err = s.HoldSeats(ctx, "show", "alice", []string{"s2", "s5"}, 10, ttl, now)
	wantTaken(t, "HoldSeats overlapping the same holder", err, "s2")

	// Neither failed request held anything: its free seats are still free.
	wantHeld(t, s, "show", now, "s1", "s2", "s3")
	second := mustHoldSeats(t, s, "show", "carol", []string{"s0", "s4", "s5"}, 3, ttl, now)
	wantHeld(t, s, "show", now, "s0", "s1", "s2", "s3", "s4", "s5")
	// The failures did not count towards bob's or alice's limit.
	mustHoldSeats(t, s, "show", "bob", []string{"s6", "s7"}, 2, ttl, now)
	mustHoldSeats(t, s, "show", "alice", []string{"s8"}, 4, ttl, now)
	if d := diffHold(mustGet(t, s, "show", first.ID, now), first); d != "" {
		t.Errorf("first hold changed (-want +got):\n%s", d)
	}
	if d := diffHold(mustGet(t, s, "show", second.ID, now), second); d != "" {
		t.Errorf("second hold changed (-want +got):\n%s", d)
	}
}

func testDuplicateSeats(t *testing.T, s hold.Store) {
	ctx := context.Background()
	mustHoldSeats(t, s, "show", "alice", []string{"s9"}, 10, ttl, t0)
	_, err := s.HoldSeats(ctx, "show", "bob", []string{"s1", "s2", "s1"}, 10, ttl, t0)
	wantTaken(t, "HoldSeats naming s1 twice", err, "s1")
	_, err = s.HoldSeats(ctx, "show", "bob", []string{"s3", "s9", "s3", "s9", "s3"}, 10, ttl, t0)
	wantTaken(t, "HoldSeats naming s3 and a held seat twice", err, "s3", "s9")
	wantHeld(t, s, "show", t0, "s9")
	mustHoldSeats(t, s, "show", "carol", []string{"s1", "s2", "s3"}, 3, ttl, t0)
}

func testSeatExpiry(t *testing.T, s hold.Store) {
	ctx := context.Background()
	h := mustHoldSeats(t, s, "show", "alice", []string{"s1", "s2"}, 2, ttl, t0)
	later := mustHoldSeats(t, s, "show", "bob", []string{"s3"}, 2, 2*ttl, t0)
	end := t0.Add(ttl)

	// Live until the last moment before ExpiresAt.
	before := end.Add(-time.Millisecond)
	mustGet(t, s, "show", h.ID, before)
	wantHeld(t, s, "show", before, "s1", "s2", "s3")
	_, err := s.HoldSeats(ctx, "show", "carol", []string{"s2"}, 2, ttl, before)
	wantTaken(t, "HoldSeats just before expiry", err, "s2")
	_, err = s.HoldSeats(ctx, "show", "alice", []string{"s4"}, 2, ttl, before)
	wantErr(t, "HoldSeats over alice's limit just before expiry", err, hold.ErrLimit)

	// Gone at ExpiresAt.
	wantNotFound(t, s, "show", h.ID, end)
	wantHeld(t, s, "show", end, "s3")
	mustHoldSeats(t, s, "show", "carol", []string{"s2", "s1"}, 2, ttl, end)
	// alice's expired hold no longer counts towards her limit.
	mustHoldSeats(t, s, "show", "alice", []string{"s4", "s5"}, 2, ttl, end)
	mustGet(t, s, "show", later.ID, end)
}

func testRelease(t *testing.T, s hold.Store) {
	h := mustHoldSeats(t, s, "show", "alice", []string{"s1", "s2"}, 2, ttl, t0)
	other := mustHoldSeats(t, s, "show", "bob", []string{"s3"}, 2, ttl, t0)
	mustRelease(t, s, "show", h.ID, t0)
	wantNotFound(t, s, "show", h.ID, t0)
	wantHeld(t, s, "show", t0, "s3")
	mustHoldSeats(t, s, "show", "carol", []string{"s1"}, 2, ttl, t0)
	mustHoldSeats(t, s, "show", "alice", []string{"s2", "s4"}, 2, ttl, t0)
	mustGet(t, s, "show", other.ID, t0)
}

func testNotFound(t *testing.T, s hold.Store) {
	wantNotFound(t, s, "nowhere", "no-such-id", t0)
	h := mustHoldSeats(t, s, "show", "alice", []string{"s1"}, 1, ttl, t0)
	wantNotFound(t, s, "show", "no-such-id", t0)
	wantNotFound(t, s, "other-show", h.ID, t0)
	mustGet(t, s, "show", h.ID, t0)
}

func testSeatLimit(t *testing.T, s hold.Store) {
	ctx := context.Background()
	mustSetStock(t, s, "show", 10)
	mustHoldStock(t, s, "show", "alice", 5, 5, ttl, t0) // units are not seats
	first := mustHoldSeats(t, s, "show", "alice", []string{"s1", "s2", "s3"}, 4, ttl, t0)
	_, err := s.HoldSeats(ctx, "show", "alice", []string{"s4", "s5"}, 4, ttl, t0)
	wantErr(t, "HoldSeats past the limit", err, hold.ErrLimit)
	wantHeld(t, s, "show", t0, "s1", "s2", "s3")
	_, err = s.HoldSeats(ctx, "show", "bob", []string{"s4", "s5", "s6"}, 2, ttl, t0)
	wantErr(t, "HoldSeats of more than the limit at once", err, hold.ErrLimit)
	_, err = s.HoldSeats(ctx, "show", "dave", []string{"s9"}, 0, ttl, t0)
	wantErr(t, "HoldSeats with limit 0", err, hold.ErrLimit)
	wantHeld(t, s, "show", t0, "s1", "s2", "s3")

	mustHoldSeats(t, s, "show", "alice", []string{"s4"}, 4, ttl, t0) // exactly the limit
	mustHoldSeats(t, s, "show", "bob", []string{"s5", "s6"}, 2, ttl, t0)
	mustRelease(t, s, "show", first.ID, t0)
	mustHoldSeats(t, s, "show", "alice", []string{"s1", "s2", "s3"}, 4, ttl, t0)
}

func testErrorPrecedence(t *testing.T, s hold.Store) {
	ctx := context.Background()
	mustHoldSeats(t, s, "show", "alice", []string{"s1", "s2"}, 2, ttl, t0)
	_, err := s.HoldSeats(ctx, "show", "alice", []string{"s2", "s3"}, 2, ttl, t0)
	wantTaken(t, "HoldSeats taken and past the limit", err, "s2")

	mustSetStock(t, s, "show", 3)
	mustHoldStock(t, s, "show", "bob", 2, 2, ttl, t0)
	_, err = s.HoldStock(ctx, "show", "bob", 2, 2, ttl, t0)
	wantErr(t, "HoldStock sold out and past the limit", err, hold.ErrSoldOut)
	_, err = s.HoldStock(ctx, "show", "bob", 1, 2, ttl, t0)
	wantErr(t, "HoldStock past the limit", err, hold.ErrLimit)
	wantStock(t, s, "show", t0, 1)
}

func testScopes(t *testing.T, s hold.Store) {
	ctx := context.Background()
	a := mustHoldSeats(t, s, "show-a", "alice", []string{"s1", "s2"}, 2, ttl, t0)
	b := mustHoldSeats(t, s, "show-b", "bob", []string{"s1", "s2"}, 2, ttl, t0)
	// alice's limit in show-a says nothing about show-b.
	mustHoldSeats(t, s, "show-b", "alice", []string{"s3", "s4"}, 2, ttl, t0)
	wantHeld(t, s, "show-a", t0, "s1", "s2")
	wantHeld(t, s, "show-b", t0, "s1", "s2", "s3", "s4")
	wantNotFound(t, s, "show-b", a.ID, t0)
	mustRelease(t, s, "show-a", a.ID, t0)
	wantHeld(t, s, "show-b", t0, "s1", "s2", "s3", "s4")
	mustGet(t, s, "show-b", b.ID, t0)

	mustSetStock(t, s, "ga-a", 5)
	mustSetStock(t, s, "ga-b", 1)
	mustHoldStock(t, s, "ga-a", "alice", 4, 4, ttl, t0)
	mustHoldStock(t, s, "ga-b", "alice", 1, 4, ttl, t0)
	wantStock(t, s, "ga-a", t0, 1)
	wantStock(t, s, "ga-b", t0, 0)
	_, err := s.HoldStock(ctx, "ga-b", "bob", 1, 4, ttl, t0)
	wantErr(t, "HoldStock in an emptied scope", err, hold.ErrSoldOut)
}

func testStock(t *testing.T, s hold.Store) {
	ctx := context.Background()
	wantStock(t, s, "ga", t0, 0)
	_, err := s.HoldStock(ctx, "ga", "alice", 1, 10, ttl, t0)
	wantErr(t, "HoldStock before SetStock", err, hold.ErrSoldOut)

	mustSetStock(t, s, "ga", 10)
	wantStock(t, s, "ga", t0, 10)
	h := mustHoldStock(t, s, "ga", "alice", 3, 10, ttl, t0)
	want := hold.Hold{ID: h.ID, Scope: "ga", Holder: "alice", Quantity: 3, ExpiresAt: t0.Add(ttl)}
	if d := diffHold(h, want); d != "" {
		t.Errorf("HoldStock returned (-want +got):\n%s", d)
	}
	if d := diffHold(mustGet(t, s, "ga", h.ID, t0), want); d != "" {
		t.Errorf("Get (-want +got):\n%s", d)
	}
	wantStock(t, s, "ga", t0, 7)
	wantHeld(t, s, "ga", t0) // units are not seats

	_, err = s.HoldStock(ctx, "ga", "bob", 8, 10, ttl, t0)
	wantErr(t, "HoldStock of more than is left", err, hold.ErrSoldOut)
	wantStock(t, s, "ga", t0, 7)
	last := mustHoldStock(t, s, "ga", "bob", 7, 10, ttl, t0)
	wantStock(t, s, "ga", t0, 0)
	_, err = s.HoldStock(ctx, "ga", "carol", 1, 10, ttl, t0)
	wantErr(t, "HoldStock when none is left", err, hold.ErrSoldOut)

	mustRelease(t, s, "ga", h.ID, t0)
	wantStock(t, s, "ga", t0, 3)
	wantNotFound(t, s, "ga", h.ID, t0)
	mustRelease(t, s, "ga", last.ID, t0)
	wantStock(t, s, "ga", t0, 10)
}

func testStockLimit(t *testing.T, s hold.Store) {
	ctx := context.Background()
	mustSetStock(t, s, "ga", 100)
	mustHoldSeats(t, s, "ga", "alice", []string{"s1", "s2"}, 2, ttl, t0) // seats are not units
	first := mustHoldStock(t, s, "ga", "alice", 3, 4, ttl, t0)
	_, err := s.HoldStock(ctx, "ga", "alice", 2, 4, ttl, t0)
	wantErr(t, "HoldStock past the limit", err, hold.ErrLimit)
	wantStock(t, s, "ga", t0, 97)
	mustHoldStock(t, s, "ga", "alice", 1, 4, ttl, t0) // exactly the limit
	mustHoldStock(t, s, "ga", "bob", 4, 4, ttl, t0)
	_, err = s.HoldStock(ctx, "ga", "carol", 5, 4, ttl, t0)
	wantErr(t, "HoldStock of more than the limit at once", err, hold.ErrLimit)
	wantStock(t, s, "ga", t0, 92)

	mustRelease(t, s, "ga", first.ID, t0)
	mustHoldStock(t, s, "ga", "alice", 3, 4, ttl, t0)
	// After expiry nothing of alice's counts.
	end := t0.Add(ttl)
	_, err = s.HoldStock(ctx, "ga", "alice", 1, 4, ttl, end.Add(-time.Millisecond))
	wantErr(t, "HoldStock past the limit just before expiry", err, hold.ErrLimit)
	mustHoldStock(t, s, "ga", "alice", 4, 4, ttl, end)
	wantStock(t, s, "ga", end, 96)
}

func testStockExpiry(t *testing.T, s hold.Store) {
	mustSetStock(t, s, "ga", 10)
	short := mustHoldStock(t, s, "ga", "alice", 3, 10, time.Minute, t0)
	long := mustHoldStock(t, s, "ga", "bob", 2, 10, time.Hour, t0)
	at := t0.Add(time.Minute)
	wantStock(t, s, "ga", at.Add(-time.Millisecond), 5)
	mustGet(t, s, "ga", short.ID, at.Add(-time.Millisecond))
	wantStock(t, s, "ga", at, 8)
	wantNotFound(t, s, "ga", short.ID, at)
	wantStock(t, s, "ga", at, 8) // returned once
	mustGet(t, s, "ga", long.ID, at)
	wantStock(t, s, "ga", t0.Add(time.Hour), 10)
	wantNotFound(t, s, "ga", long.ID, t0.Add(time.Hour))
}

func testSetStockKeepsHolds(t *testing.T, s hold.Store) {
	mustSetStock(t, s, "ga", 10)
	h := mustHoldStock(t, s, "ga", "alice", 3, 10, ttl, t0)
	mustSetStock(t, s, "ga", 20)
	wantStock(t, s, "ga", t0, 20)
	mustGet(t, s, "ga", h.ID, t0)
	mustRelease(t, s, "ga", h.ID, t0)
	wantStock(t, s, "ga", t0, 23)
}

func testConsumeStock(t *testing.T, s hold.Store) {
	mustSetStock(t, s, "ga", 10)
	sold := mustHoldStock(t, s, "ga", "alice", 3, 3, ttl, t0)
	expired := mustHoldStock(t, s, "ga", "bob", 2, 3, time.Minute, t0)
	mustConsume(t, s, "ga", sold.ID, t0)
	wantStock(t, s, "ga", t0, 5)
	wantNotFound(t, s, "ga", sold.ID, t0)
	wantStock(t, s, "ga", t0, 5) // neither Release nor Consume of an ended hold gives units back
	// The units are sold: they do not come back at the hold's expiry.
	wantStock(t, s, "ga", t0.Add(ttl), 7)
	// Consuming an expired hold fails; its units came back at expiry.
	wantNotFound(t, s, "ga", expired.ID, t0.Add(time.Minute))
	wantStock(t, s, "ga", t0.Add(ttl), 7)
	// alice's limit is free again.
	mustHoldStock(t, s, "ga", "alice", 3, 3, ttl, t0)
}

func testConsumeSeats(t *testing.T, s hold.Store) {
	h := mustHoldSeats(t, s, "show", "alice", []string{"s1", "s2"}, 2, ttl, t0)
	mustHoldSeats(t, s, "show", "bob", []string{"s3"}, 2, ttl, t0)
	mustConsume(t, s, "show", h.ID, t0)
	wantNotFound(t, s, "show", h.ID, t0)
	// SQL owns sold seats now: the hold store lets them go.
	wantHeld(t, s, "show", t0, "s3")
	mustHoldSeats(t, s, "show", "alice", []string{"s4", "s5"}, 2, ttl, t0)
	mustHoldSeats(t, s, "show", "carol", []string{"s1", "s2"}, 2, ttl, t0)
}

// testFind: the live hold that has a seat, until it expires or ends.
func testFind(t *testing.T, s hold.Store) {
	ctx := context.Background()
	h := mustHoldSeats(t, s, "show", "alice", []string{"a1", "a2"}, 10, ttl, t0)
	other := mustHoldSeats(t, s, "show", "bob", []string{"b1"}, 10, ttl, t0)
	for seat, want := range map[string]string{"a1": h.ID, "a2": h.ID, "b1": other.ID} {
		got, err := s.Find(ctx, "show", seat, t0.Add(ttl-time.Millisecond))
		if err != nil || got.ID != want || got.Scope != "show" {
			t.Errorf("Find(%s) = %+v, %v; want hold %s", seat, got, err, want)
		}
	}
	if got, _ := s.Find(ctx, "show", "a1", t0); got.Holder != "alice" || len(got.Seats) != 2 || !got.ExpiresAt.Equal(t0.Add(ttl)) {
		t.Errorf("Find(a1) = %+v, want alice's hold of 2 seats until %v", got, t0.Add(ttl))
	}
	for _, tc := range []struct {
		scope, seat string
		now         time.Time
	}{
		{"show", "zz", t0},  // never held
		{"other", "a1", t0}, // another scope
	} {
		if _, err := s.Find(ctx, tc.scope, tc.seat, tc.now); !errors.Is(err, hold.ErrNotFound) {
			t.Errorf("Find(%s, %s) at %v: err = %v, want ErrNotFound", tc.scope, tc.seat, tc.now.Sub(t0), err)
		}
	}
	if err := s.Release(ctx, "show", other.ID, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Find(ctx, "show", "b1", t0); !errors.Is(err, hold.ErrNotFound) {
		t.Errorf("Find after Release: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Find(ctx, "show", "a1", t0.Add(ttl)); !errors.Is(err, hold.ErrNotFound) {
		t.Errorf("Find at expiry: err = %v, want ErrNotFound", err)
	}
}
