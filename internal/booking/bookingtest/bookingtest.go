// Package bookingtest is the conformance suite that every booking.Store
// backend runs: Run for semantics, Bench for speed. It pins what the rest of
// usher relies on: the catalog (default room names, duplicate seats refused
// whole, bulk seat creation), Decide's all-or-nothing conditional sale,
// first-wins inside a batch, idempotent redelivery, stock reservations,
// the buyer limit per schedule,
// exactly one outbox event per stored decision, and — under many concurrent
// callers — that no seat is ever sold twice. It also pins the errors a
// backend returns (booking.ErrNotFound, booking.ErrInvalid; never
// sql.ErrNoRows or a driver error) and the edge cases the booking.Store
// contract leaves open, so that every backend agrees on them.
package bookingtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"usher/internal/booking"
)

// NewStore returns an empty store for one test, closed when the test ends.
type NewStore func(t testing.TB) booking.Store

// Run runs the conformance suite against stores made by newStore. The
// tests run in parallel, each on a store of its own: newStore must make
// independent stores, and release them with tb.Cleanup, not after Run
// returns (parallel subtests run after it).
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(*testing.T, booking.Store)
	}{
		{"Concerts", testConcerts},
		{"Schedules", testSchedules},
		{"UnknownIDs", testUnknownIDs},
		{"AddSeats", testAddSeats},
		{"AddSeatsDuplicate", testAddSeatsDuplicate},
		{"AddSeatsLarge", testAddSeatsLarge},
		{"DecideConfirms", testDecideConfirms},
		{"DecideSeatTaken", testDecideSeatTaken},
		{"DecideSeatUnknown", testDecideSeatUnknown},
		{"DecideMalformed", testDecideMalformed},
		{"DecideBatch", testDecideBatch},
		{"DecideRedelivery", testDecideRedelivery},
		{"DecideRedeliveryInBatch", testDecideRedeliveryInBatch},
		{"Reservation", testReservation},
		{"DecideConcurrent", testDecideConcurrent},
		{"Stock", testStock},
		{"DecideStock", testDecideStock},
		{"DecideStockRedelivery", testDecideStockRedelivery},
		{"DecideStockConcurrent", testDecideStockConcurrent},
		{"DecideBuyerLimit", testDecideBuyerLimit},
		{"DecideBuyerConcurrent", testDecideBuyerConcurrent},
		{"ListConcerts", testListConcerts},
		{"ListSchedules", testListSchedules},
		{"ListReservations", testListReservations},
		{"OutboxDecisions", testOutboxDecisions},
		{"OutboxRolledBack", testOutboxRolledBack},
		{"OutboxReads", testOutboxReads},
		{"SeatStates", testSeatStates},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each test has a store of its own
			tt.fn(t, newStore(t))
		})
	}
}

// t0 is a fixed instant with microsecond resolution, the finest every
// backend keeps.
var t0 = time.Date(2026, 11, 1, 19, 30, 0, 123456000, time.UTC)

// catalog makes a concert and a schedule with n seats ("A", row "1"…,
// numbers 1…) and returns the schedule and the seat ids in order.
func catalog(tb testing.TB, s booking.Store, n int) (booking.Schedule, []int64) {
	tb.Helper()
	ctx := context.Background()
	c, err := s.CreateConcert(ctx, "concert")
	if err != nil {
		tb.Fatalf("CreateConcert: %v", err)
	}
	sch, err := s.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID, StartsAt: t0})
	if err != nil {
		tb.Fatalf("CreateSchedule: %v", err)
	}
	return sch, addSeats(tb, s, sch.ID, specs("A", n))
}

// specs returns n seat specs of one section, 100 to a row.
func specs(section string, n int) []booking.SeatSpec {
	out := make([]booking.SeatSpec, n)
	for i := range out {
		out[i] = booking.SeatSpec{Section: section, Row: fmt.Sprint(i/100 + 1), Number: i%100 + 1, Price: 50_000}
	}
	return out
}

func addSeats(tb testing.TB, s booking.Store, scheduleID int64, specs []booking.SeatSpec) []int64 {
	tb.Helper()
	ids, err := s.AddSeats(context.Background(), scheduleID, specs)
	if err != nil {
		tb.Fatalf("AddSeats(%d, %d seats): %v", scheduleID, len(specs), err)
	}
	if len(ids) != len(specs) {
		tb.Fatalf("AddSeats returned %d ids for %d seats", len(ids), len(specs))
	}
	return ids
}

func seats(tb testing.TB, s booking.Store, scheduleID int64) []booking.Seat {
	tb.Helper()
	got, err := s.Seats(context.Background(), scheduleID)
	if err != nil {
		tb.Fatalf("Seats(%d): %v", scheduleID, err)
	}
	return got
}

// seatMap returns a schedule's seats by id.
func seatMap(tb testing.TB, s booking.Store, scheduleID int64) map[int64]booking.Seat {
	tb.Helper()
	m := map[int64]booking.Seat{}
	for _, seat := range seats(tb, s, scheduleID) {
		m[seat.ID] = seat
	}
	return m
}

func decide(tb testing.TB, s booking.Store, rs ...booking.Reservation) []booking.Reservation {
	tb.Helper()
	got, err := s.Decide(context.Background(), rs)
	if err != nil {
		tb.Fatalf("Decide(%d reservations): %v", len(rs), err)
	}
	if len(got) != len(rs) {
		tb.Fatalf("Decide returned %d reservations for %d", len(got), len(rs))
	}
	return got
}

// pending returns a pending reservation of seats.
func pending(id string, scheduleID int64, seats ...int64) booking.Reservation {
	return booking.Reservation{
		ID: id, Visitor: "visitor-" + id, ScheduleID: scheduleID, SeatIDs: seats,
		Status: booking.Pending, CreatedAt: t0,
	}
}

// wantDecided checks that got is r decided as status/reason: the request's
// fields kept, a decision time set.
func wantDecided(tb testing.TB, got, r booking.Reservation, status booking.ReservationStatus, reason string) {
	tb.Helper()
	want := r
	want.Status, want.Reason, want.DecidedAt = status, reason, got.DecidedAt
	if diff := cmp.Diff(want, got); diff != "" {
		tb.Errorf("Decide(%s) mismatch (-want +got):\n%s", r.ID, diff)
	}
	if got.DecidedAt.IsZero() {
		tb.Errorf("Decide(%s): DecidedAt is zero", r.ID)
	}
}

// wantSeat checks one seat's status and owner.
func wantSeat(tb testing.TB, m map[int64]booking.Seat, id int64, status booking.SeatStatus, owner string) {
	tb.Helper()
	seat, ok := m[id]
	if !ok {
		tb.Errorf("seat %d missing", id)
		return
	}
	if seat.Status != status || seat.ReservationID != owner {
		tb.Errorf("seat %d = %s owned by %q, want %s owned by %q", id, seat.Status, seat.ReservationID, status, owner)
	}
}

func testConcerts(t *testing.T, s booking.Store) {
	ctx := context.Background()
	before := time.Now().Add(-time.Second)
	a, err := s.CreateConcert(ctx, "IU 2026")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.CreateConcert(ctx, "BTS 2026")
	if err != nil {
		t.Fatal(err)
	}
	if a.ID <= 0 || b.ID <= 0 || a.ID == b.ID {
		t.Errorf("concert ids %d, %d: want distinct positive ids", a.ID, b.ID)
	}
	if a.Title != "IU 2026" {
		t.Errorf("title = %q, want %q", a.Title, "IU 2026")
	}
	if a.CreatedAt.Before(before) || a.CreatedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("CreatedAt = %v, want about now", a.CreatedAt)
	}
}

func testSchedules(t *testing.T, s booking.Store) {
	ctx := context.Background()
	c, err := s.CreateConcert(ctx, "concert")
	if err != nil {
		t.Fatal(err)
	}
	def, err := s.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID, StartsAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("schedule-%d", def.ID); def.Room != want {
		t.Errorf("default room = %q, want %q", def.Room, want)
	}
	custom, err := s.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID, StartsAt: t0.Add(24 * time.Hour), Room: "iu-day2"})
	if err != nil {
		t.Fatal(err)
	}
	if custom.Room != "iu-day2" {
		t.Errorf("custom room = %q, want %q", custom.Room, "iu-day2")
	}
	if def.ID <= 0 || custom.ID == def.ID {
		t.Errorf("schedule ids %d, %d: want distinct positive ids", def.ID, custom.ID)
	}
	for _, want := range []booking.Schedule{def, custom} {
		got, err := s.Schedule(ctx, want.ID)
		if err != nil {
			t.Fatalf("Schedule(%d): %v", want.ID, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Schedule(%d) mismatch (-created +read):\n%s", want.ID, diff)
		}
		if got.ConcertID != c.ID || !got.StartsAt.Equal(want.StartsAt) {
			t.Errorf("Schedule(%d) = %+v, want concert %d", want.ID, got, c.ID)
		}
	}
	if !def.StartsAt.Equal(t0) {
		t.Errorf("StartsAt = %v, want %v", def.StartsAt, t0)
	}
	all, err := s.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]booking.Schedule{def, custom}, all); diff != "" {
		t.Errorf("Schedules mismatch (-created +listed):\n%s", diff)
	}
}

func testUnknownIDs(t *testing.T, s booking.Store) {
	ctx := context.Background()
	const missing = 987654321
	checks := map[string]func() error{
		"CreateSchedule": func() error {
			_, err := s.CreateSchedule(ctx, booking.Schedule{ConcertID: missing, StartsAt: t0})
			return err
		},
		"Schedule":    func() error { _, err := s.Schedule(ctx, missing); return err },
		"AddSeats":    func() error { _, err := s.AddSeats(ctx, missing, specs("A", 3)); return err },
		"Seats":       func() error { _, err := s.Seats(ctx, missing); return err },
		"Reservation": func() error { _, err := s.Reservation(ctx, "no-such-reservation"); return err },
	}
	for op, call := range checks {
		if err := call(); !errors.Is(err, booking.ErrNotFound) {
			t.Errorf("%s of an unknown id: err = %v, want ErrNotFound", op, err)
		}
	}
}

func testAddSeats(t *testing.T, s booking.Store) {
	ctx := context.Background()
	sch, _ := catalog(t, s, 0)
	if got := seats(t, s, sch.ID); len(got) != 0 {
		t.Errorf("Seats of a new schedule = %v, want none", got)
	}
	in := []booking.SeatSpec{
		{Section: "VIP", Row: "A", Number: 2, Price: 150_000},
		{Section: "VIP", Row: "A", Number: 1, Price: 150_000},
		{Section: "R", Row: "B", Number: 7, Price: 99_000},
	}
	ids := addSeats(t, s, sch.ID, in)
	more := addSeats(t, s, sch.ID, []booking.SeatSpec{{Section: "R", Row: "B", Number: 8, Price: 99_000}})
	in, ids = append(in, booking.SeatSpec{Section: "R", Row: "B", Number: 8, Price: 99_000}), append(ids, more...)

	var want []booking.Seat
	for i, spec := range in {
		want = append(want, booking.Seat{ID: ids[i], ScheduleID: sch.ID, SeatSpec: spec, Status: booking.Available})
	}
	slices.SortFunc(want, func(a, b booking.Seat) int { return int(a.ID - b.ID) })
	if diff := cmp.Diff(want, seats(t, s, sch.ID)); diff != "" {
		t.Errorf("Seats mismatch (-want +got):\n%s", diff)
	}
	if got, err := s.AddSeats(ctx, sch.ID, nil); err != nil || len(got) != 0 {
		t.Errorf("AddSeats(none) = %v, %v; want no ids, no error", got, err)
	}
	// The same seat in another schedule is another seat.
	other, err := s.CreateSchedule(ctx, booking.Schedule{ConcertID: sch.ConcertID, StartsAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	addSeats(t, s, other.ID, in[:1])
	if got := seats(t, s, sch.ID); len(got) != len(in) {
		t.Errorf("schedule %d has %d seats after adding to schedule %d, want %d", sch.ID, len(got), other.ID, len(in))
	}
}

func testAddSeatsDuplicate(t *testing.T, s booking.Store) {
	ctx := context.Background()
	sch, _ := catalog(t, s, 10) // A 1-1 … A 1-10
	tests := []struct {
		name  string
		want  error // the client's words: the same on every backend
		seats []booking.SeatSpec
	}{
		{"already present", booking.ErrSeatExists, []booking.SeatSpec{
			{Section: "B", Row: "1", Number: 1, Price: 1},
			{Section: "A", Row: "1", Number: 5, Price: 1}, // present
			{Section: "B", Row: "1", Number: 2, Price: 1},
		}},
		{"twice in the call", booking.ErrInvalid, []booking.SeatSpec{
			{Section: "C", Row: "1", Number: 1, Price: 1},
			{Section: "C", Row: "1", Number: 2, Price: 1},
			{Section: "C", Row: "1", Number: 1, Price: 1},
		}},
	}
	for _, tt := range tests {
		ids, err := s.AddSeats(ctx, sch.ID, tt.seats)
		if !errors.Is(err, booking.ErrInvalid) || !errors.Is(err, tt.want) {
			t.Errorf("%s: AddSeats = %v, %v; want %v", tt.name, ids, err, tt.want)
		}
		if got := seats(t, s, sch.ID); len(got) != 10 {
			t.Errorf("%s: %d seats after the refused AddSeats, want the 10 before it", tt.name, len(got))
		}
	}
}

// testAddSeatsLarge adds a stadium in one call. It sets no deadline: a
// loaded machine under -race once took more than a minute here, and speed
// (a backend must not commit once per seat) is measured by Bench, not by a
// test.
func testAddSeatsLarge(t *testing.T, s booking.Store) {
	const n = 50_000
	sch, _ := catalog(t, s, 0)
	ctx := context.Background()
	in := specs("S", n)
	ids, err := s.AddSeats(ctx, sch.ID, in)
	if err != nil {
		t.Fatalf("AddSeats(%d seats): %v", n, err)
	}
	if len(ids) != n {
		t.Fatalf("AddSeats returned %d ids, want %d", len(ids), n)
	}
	got := seats(t, s, sch.ID)
	if len(got) != n {
		t.Fatalf("Seats = %d seats, want %d", len(got), n)
	}
	byID := map[int64]booking.SeatSpec{}
	for i, id := range ids {
		byID[id] = in[i]
	}
	for i, seat := range got {
		if i > 0 && seat.ID <= got[i-1].ID {
			t.Fatalf("Seats not ordered by id at %d: %d after %d", i, seat.ID, got[i-1].ID)
		}
		if spec, ok := byID[seat.ID]; !ok || spec != seat.SeatSpec || seat.Status != booking.Available {
			t.Fatalf("seat %d = %+v, want %+v AVAILABLE", seat.ID, seat, spec)
		}
	}
}

func testDecideConfirms(t *testing.T, s booking.Store) {
	sch, ids := catalog(t, s, 5)
	r := pending("r1", sch.ID, ids[3], ids[1])
	before := time.Now().Add(-time.Second)
	got := decide(t, s, r)[0]
	wantDecided(t, got, r, booking.Confirmed, "")
	if got.DecidedAt.Before(before) || got.DecidedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("DecidedAt = %v, want about now", got.DecidedAt)
	}
	m := seatMap(t, s, sch.ID)
	wantSeat(t, m, ids[1], booking.Sold, "r1")
	wantSeat(t, m, ids[3], booking.Sold, "r1")
	for _, i := range []int{0, 2, 4} {
		wantSeat(t, m, ids[i], booking.Available, "")
	}
	// A reservation without a creation time gets one.
	r2 := pending("r2", sch.ID, ids[0])
	r2.CreatedAt = time.Time{}
	if got := decide(t, s, r2)[0]; got.Status != booking.Confirmed || got.CreatedAt.IsZero() {
		t.Errorf("Decide(r2 without CreatedAt) = %+v, want confirmed with a CreatedAt", got)
	}
}

// testDecideSeatTaken puts the free seat first, so that a backend that
// sold seats one by one without rolling back would sell it.
func testDecideSeatTaken(t *testing.T, s booking.Store) {
	sch, ids := catalog(t, s, 4)
	decide(t, s, pending("first", sch.ID, ids[0]))
	r := pending("second", sch.ID, ids[1], ids[2], ids[0])
	wantDecided(t, decide(t, s, r)[0], r, booking.Rejected, booking.ReasonSeatTaken)
	m := seatMap(t, s, sch.ID)
	wantSeat(t, m, ids[0], booking.Sold, "first")
	wantSeat(t, m, ids[1], booking.Available, "")
	wantSeat(t, m, ids[2], booking.Available, "")
	// The refused seats are still for sale.
	r = pending("third", sch.ID, ids[1], ids[2])
	wantDecided(t, decide(t, s, r)[0], r, booking.Confirmed, "")
}

func testDecideSeatUnknown(t *testing.T, s booking.Store) {
	ctx := context.Background()
	sch, ids := catalog(t, s, 3)
	other, err := s.CreateSchedule(ctx, booking.Schedule{ConcertID: sch.ConcertID, StartsAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	otherIDs := addSeats(t, s, other.ID, specs("A", 2))
	const noSuchSeat = 1 << 40
	tests := []booking.Reservation{
		pending("nonexistent", sch.ID, ids[0], noSuchSeat),
		pending("other-schedule", sch.ID, ids[1], otherIDs[0]),
		pending("no-schedule", 1<<40, ids[2]),
		// One seat unknown and one taken: unknown wins, whatever the order.
		pending("taken-and-unknown", other.ID, otherIDs[1], ids[0]),
	}
	decide(t, s, pending("taker", other.ID, otherIDs[1]))
	for _, r := range tests {
		wantDecided(t, decide(t, s, r)[0], r, booking.Rejected, booking.ReasonSeatUnknown)
	}
	m := seatMap(t, s, sch.ID)
	for _, id := range ids {
		wantSeat(t, m, id, booking.Available, "")
	}
	m = seatMap(t, s, other.ID)
	wantSeat(t, m, otherIDs[0], booking.Available, "")
	wantSeat(t, m, otherIDs[1], booking.Sold, "taker")
}

// testDecideMalformed pins the cases the contract leaves open: a
// reservation naming no seat is rejected with ReasonSeatUnknown, one naming
// a seat twice with ReasonSeatTaken (its second conditional UPDATE would
// touch no row), and a reservation without an id is ErrInvalid for the
// whole call. (testDecideStock pins the stock ones: a quantity below 0,
// seats with a quantity, or a schedule without stock are ReasonSoldOut.)
func testDecideMalformed(t *testing.T, s booking.Store) {
	ctx := context.Background()
	sch, ids := catalog(t, s, 3)
	noSeat := pending("no-seat", sch.ID)
	twice := pending("twice", sch.ID, ids[0], ids[1], ids[0])
	got := decide(t, s, noSeat, twice)
	wantDecided(t, got[0], noSeat, booking.Rejected, booking.ReasonSeatUnknown)
	wantDecided(t, got[1], twice, booking.Rejected, booking.ReasonSeatTaken)
	if _, err := s.Decide(ctx, []booking.Reservation{pending("fine", sch.ID, ids[2]), pending("", sch.ID, ids[1])}); !errors.Is(err, booking.ErrInvalid) {
		t.Errorf("Decide(a reservation without id) err = %v, want ErrInvalid", err)
	}
	if _, err := s.Reservation(ctx, "fine"); !errors.Is(err, booking.ErrNotFound) {
		t.Errorf("Reservation(fine) after a refused call: err = %v, want ErrNotFound (nothing decided)", err)
	}
	for _, seat := range seats(t, s, sch.ID) {
		if seat.Status != booking.Available {
			t.Errorf("seat %d = %s, want AVAILABLE", seat.ID, seat.Status)
		}
	}
	if got, err := s.Decide(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("Decide(none) = %v, %v; want nothing, no error", got, err)
	}
}

// testDecideBatch decides one batch whose reservations compete with each
// other and with an earlier sale: within a batch, the earlier reservation
// wins, and a rejected one frees its seats for the ones after it.
func testDecideBatch(t *testing.T, s booking.Store) {
	sch, ids := catalog(t, s, 8)
	decide(t, s, pending("earlier", sch.ID, ids[7]))
	batch := []booking.Reservation{
		pending("a", sch.ID, ids[0]),
		pending("b", sch.ID, ids[1], ids[2]),
		pending("c", sch.ID, ids[2]),         // b took it
		pending("d", sch.ID, ids[3], ids[0]), // a took ids[0]; ids[3] stays free
		pending("e", sch.ID, ids[4], ids[7]), // sold before the batch
		pending("f", sch.ID, ids[4], ids[3]), // e and d were refused: both free
		pending("g", sch.ID, ids[5]),
	}
	got := decide(t, s, batch...)
	want := []struct {
		status booking.ReservationStatus
		reason string
	}{
		{booking.Confirmed, ""},
		{booking.Confirmed, ""},
		{booking.Rejected, booking.ReasonSeatTaken},
		{booking.Rejected, booking.ReasonSeatTaken},
		{booking.Rejected, booking.ReasonSeatTaken},
		{booking.Confirmed, ""},
		{booking.Confirmed, ""},
	}
	for i, w := range want {
		wantDecided(t, got[i], batch[i], w.status, w.reason)
	}
	m := seatMap(t, s, sch.ID)
	owners := []string{"a", "b", "b", "f", "f", "g", "", "earlier"}
	for i, owner := range owners {
		status := booking.Sold
		if owner == "" {
			status = booking.Available
		}
		wantSeat(t, m, ids[i], status, owner)
	}
}

func testDecideRedelivery(t *testing.T, s booking.Store) {
	ctx := context.Background()
	sch, ids := catalog(t, s, 6)
	ok := decide(t, s, pending("ok", sch.ID, ids[0]))[0]
	taker := decide(t, s, pending("taker", sch.ID, ids[2]))[0]
	no := decide(t, s, pending("no", sch.ID, ids[1], ids[2]))[0]
	if ok.Status != booking.Confirmed || taker.Status != booking.Confirmed || no.Status != booking.Rejected {
		t.Fatalf("setup: ok %s, taker %s, no %s", ok.Status, taker.Status, no.Status)
	}
	// Redelivered with other seats (free ones), in a batch with a new one.
	again := []booking.Reservation{
		pending("ok", sch.ID, ids[3]),
		pending("no", sch.ID, ids[4]),
		pending("new", sch.ID, ids[5]),
	}
	got := decide(t, s, again...)
	if diff := cmp.Diff(ok, got[0]); diff != "" {
		t.Errorf("redelivered confirmed reservation: want the stored decision (-stored +got):\n%s", diff)
	}
	if diff := cmp.Diff(no, got[1]); diff != "" {
		t.Errorf("redelivered rejected reservation: want the stored decision (-stored +got):\n%s", diff)
	}
	wantDecided(t, got[2], again[2], booking.Confirmed, "")
	m := seatMap(t, s, sch.ID)
	wantSeat(t, m, ids[0], booking.Sold, "ok")
	wantSeat(t, m, ids[1], booking.Available, "")
	wantSeat(t, m, ids[3], booking.Available, "")
	wantSeat(t, m, ids[4], booking.Available, "")
	wantSeat(t, m, ids[5], booking.Sold, "new")
	for _, want := range []booking.Reservation{ok, no} {
		stored, err := s.Reservation(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, stored); diff != "" {
			t.Errorf("Reservation(%s) changed by the redelivery (-before +after):\n%s", want.ID, diff)
		}
	}
}

func testDecideRedeliveryInBatch(t *testing.T, s booking.Store) {
	sch, ids := catalog(t, s, 3)
	first := pending("dup", sch.ID, ids[0])
	got := decide(t, s, first, pending("dup", sch.ID, ids[1]), pending("other", sch.ID, ids[2]))
	wantDecided(t, got[0], first, booking.Confirmed, "")
	if diff := cmp.Diff(got[0], got[1]); diff != "" {
		t.Errorf("second delivery in the same batch: want the first's decision (-first +second):\n%s", diff)
	}
	m := seatMap(t, s, sch.ID)
	wantSeat(t, m, ids[0], booking.Sold, "dup")
	wantSeat(t, m, ids[1], booking.Available, "")
	wantSeat(t, m, ids[2], booking.Sold, "other")
}

func testReservation(t *testing.T, s booking.Store) {
	ctx := context.Background()
	sch, ids := catalog(t, s, 3)
	decided := decide(t, s, pending("yes", sch.ID, ids[0], ids[1]), pending("no", sch.ID, ids[1], ids[2]))
	for _, want := range decided {
		got, err := s.Reservation(ctx, want.ID)
		if err != nil {
			t.Fatalf("Reservation(%s): %v", want.ID, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Reservation(%s) mismatch (-decided +read):\n%s", want.ID, diff)
		}
	}
	if _, err := s.Reservation(ctx, "maybe"); !errors.Is(err, booking.ErrNotFound) {
		t.Errorf("Reservation(unknown) err = %v, want ErrNotFound", err)
	}
}

// testSeatStates: a store that offers SeatStates agrees with Seats: the
// count of the schedule's seats (added ones included) and the seats not
// AVAILABLE, in id order; ErrNotFound for an unknown schedule.
func testSeatStates(t *testing.T, s booking.Store) {
	st, ok := s.(booking.SeatStater)
	if !ok {
		t.Skip("no SeatStates: the seat map rebuilds from Seats")
	}
	ctx := context.Background()
	sch, ids := catalog(t, s, 6)
	empty, err := s.CreateSchedule(ctx, booking.Schedule{ConcertID: sch.ConcertID, StartsAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	if n, taken, err := st.SeatStates(ctx, empty.ID); err != nil || n != 0 || len(taken) != 0 {
		t.Errorf("SeatStates(a schedule without seats) = %d, %v, %v; want 0, none, nil", n, taken, err)
	}
	if _, _, err := st.SeatStates(ctx, 999_999); !errors.Is(err, booking.ErrNotFound) {
		t.Errorf("SeatStates(unknown schedule) err = %v, want ErrNotFound", err)
	}
	decide(t, s, pending("r1", sch.ID, ids[4], ids[1]))
	addSeats(t, s, sch.ID, specs("B", 3))
	n, taken, err := st.SeatStates(ctx, sch.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []booking.SeatState{{ID: ids[1], Status: booking.Sold}, {ID: ids[4], Status: booking.Sold}}
	if n != 9 || !slices.Equal(taken, want) {
		t.Errorf("SeatStates = %d, %v; want 9, %v", n, taken, want)
	}
	if all := seats(t, s, sch.ID); len(all) != n {
		t.Errorf("Seats lists %d seats, SeatStates counts %d", len(all), n)
	}
}
