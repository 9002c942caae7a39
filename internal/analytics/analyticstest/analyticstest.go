// Package analyticstest is the conformance suite every analytics.Store
// passes: Run(t, newStore), through the analytics wrapper.
package analyticstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"usher/internal/analytics"
	"usher/internal/event"
	"usher/internal/hist"
)

// NewStore returns an empty store of its own, closed when tb ends.
type NewStore func(tb testing.TB) analytics.Store

// Base is the minute the suite's events happen in: recent enough for the
// default Dedupe window, on a minute boundary.
func Base() time.Time { return time.Now().UTC().Truncate(time.Minute).Add(-time.Hour) }

// Run runs the suite.
func Run(t *testing.T, newStore NewStore) {
	t.Run("Counts", func(t *testing.T) { t.Parallel(); testCounts(t, newStore(t)) })
	t.Run("Counted", func(t *testing.T) { t.Parallel(); testCounted(t, newStore(t)) })
	t.Run("Idempotent", func(t *testing.T) { t.Parallel(); testIdempotent(t, newStore(t)) })
	t.Run("PairsAcrossBatches", func(t *testing.T) { t.Parallel(); testPairs(t, newStore(t)) })
	t.Run("MergedQuantiles", func(t *testing.T) { t.Parallel(); testQuantiles(t, newStore(t)) })
	t.Run("Timeline", func(t *testing.T) { t.Parallel(); testTimeline(t, newStore(t)) })
	t.Run("Prune", func(t *testing.T) { t.Parallel(); testPrune(t, newStore(t)) })
	t.Run("Concurrent", func(t *testing.T) { t.Parallel(); testConcurrent(t, newStore(t)) })
	t.Run("Invalid", func(t *testing.T) { t.Parallel(); testInvalid(t, newStore(t)) })
}

// Ev builds an event; d, when not nil, is its Data.
func Ev(id string, typ event.Type, room string, at time.Time, visitor string, d *event.Data) event.Event {
	e := event.Event{ID: id, Type: typ, Room: room, At: at, Visitor: visitor}
	if d != nil {
		e.Data, _ = json.Marshal(d)
	}
	return e
}

func apply(tb testing.TB, a *analytics.Analytics, evs ...event.Event) analytics.Result {
	tb.Helper()
	res, err := a.Apply(context.Background(), evs)
	if err != nil {
		tb.Fatalf("Apply: %v", err)
	}
	return res
}

func report(tb testing.TB, a *analytics.Analytics, room string, from, to time.Time) analytics.Report {
	tb.Helper()
	rep, err := a.Report(context.Background(), room, from, to)
	if err != nil {
		tb.Fatalf("Report: %v", err)
	}
	return rep
}

// Script is one room's two minutes of everything.
func Script(room string, t0 time.Time) []event.Event {
	s, m := time.Second, t0.Add(time.Minute)
	return []event.Event{
		Ev("e1", event.Entered, room, t0, "v1", &event.Data{ETAMS: 20_000}),
		Ev("e2", event.Entered, room, t0.Add(s), "v2", &event.Data{ETAMS: 5_000}),
		Ev("e3", event.Entered, room, t0.Add(2*s), "v3", nil),
		Ev("e4", event.Left, room, t0.Add(3*s), "v3", &event.Data{From: "waiting"}),
		Ev("e5", event.Admitted, room, t0.Add(11*s), "v1", nil),   // waited 11 s, forecast 20 s
		Ev("e6", event.Admitted, room, m.Add(11*s), "v2", nil),    // waited 70 s, forecast 5 s
		Ev("e7", event.Admitted, room, m.Add(12*s), "ghost", nil), // no entry known
		Ev("e8", event.Skipped, room, m, "", &event.Data{Count: 3, Removed: 2}),
		Ev("e9", event.Expired, room, m.Add(s), "", &event.Data{Count: 4}),
		Ev("e10", event.Left, room, m.Add(2*s), "v1", &event.Data{From: "active"}),
		Ev("e11", event.HoldPlaced, room, m.Add(3*s), "v1", &event.Data{Schedule: 1, Units: 2}),
		Ev("e12", event.HoldReleased, room, m.Add(4*s), "v1", &event.Data{Schedule: 1, Units: 1}),
		Ev("e13", event.HoldExpired, room, m.Add(5*s), "v2", &event.Data{Schedule: 1, Units: 1}),
		Ev("e14", event.ReservationSubmitted, room, m.Add(6*s), "v1", &event.Data{Reservation: "r1", Units: 1}),
		Ev("e15", event.ReservationConfirmed, room, m.Add(7*s), "v1", &event.Data{Reservation: "r1", Units: 1, Amount: 50_000}),
		Ev("e16", event.ReservationSubmitted, room, m.Add(8*s), "v2", &event.Data{Reservation: "r2", Units: 1}),
		Ev("e17", event.ReservationRejected, room, m.Add(9*s), "v2", &event.Data{Reservation: "r2"}),
		Ev("e18", event.SettingsChanged, room, m.Add(10*s), "", &event.Data{Who: "admin", Old: json.RawMessage(`{"state":"open"}`), New: json.RawMessage(`{"state":"paused"}`)}),
	}
}

func testCounts(t *testing.T, s analytics.Store) {
	a := analytics.New(s, analytics.Options{})
	t0 := Base()
	if got := apply(t, a, Script("r", t0)...); got.Applied != 18 {
		t.Fatalf("Apply = %+v, want 18 applied", got)
	}
	apply(t, a, Ev("other", event.Entered, "r-other", t0, "v1", nil))
	rep := report(t, a, "r", t0, t0.Add(10*time.Minute))
	if len(rep.Minutes) != 2 {
		t.Fatalf("%d minutes, want 2: %+v", len(rep.Minutes), rep.Minutes)
	}
	first := rep.Minutes[0]
	want0 := analytics.Counts{Arrivals: 3, Admissions: 1, Abandons: 1, Waits: 1, WaitSumMS: 11_000, ETAs: 1, ETAErrSumMS: -9_000, ETAAbsErrSumMS: 9_000}
	if diff := cmp.Diff(want0, first.Counts); diff != "" || !first.At.Equal(t0) {
		t.Errorf("first minute at %v (want %v), counts -want +got:\n%s", first.At, t0, diff)
	}
	want := analytics.Counts{
		Arrivals: 3, Admissions: 3, Abandons: 3, Expired: 4, LeftActive: 1,
		HoldsPlaced: 1, HoldsReleased: 1, HoldsExpired: 1, Submitted: 2, Confirmed: 1, Rejected: 1, Revenue: 50_000,
		Waits: 2, WaitSumMS: 81_000, ETAs: 2, ETAErrSumMS: -9_000 + 65_000, ETAAbsErrSumMS: 9_000 + 65_000,
	}
	if diff := cmp.Diff(want, rep.Totals.Counts); diff != "" {
		t.Errorf("totals -want +got:\n%s", diff)
	}
	d := rep.Totals.Derived
	if d.Waited != 2 || d.WaitAvgMS != 40_500 || d.ETAErrorAvgMS != 28_000 || d.ETAAbsErrAvgMS != 37_000 {
		t.Errorf("derived %+v: want 2 waited, avg 40500 ms, ETA error avg 28000 ms, abs 37000 ms", d)
	}
	if math.Abs(d.Conversion-1.0/3) > 1e-9 {
		t.Errorf("conversion %v, want 1/3", d.Conversion)
	}
	within(t, "p50 of {11 s, 70 s}", time.Duration(d.WaitP50MS)*time.Millisecond, 11*time.Second)
	within(t, "p99 of {11 s, 70 s}", time.Duration(d.WaitP99MS)*time.Millisecond, 70*time.Second)
	if rep := report(t, a, "r", t0.Add(time.Minute), t0.Add(2*time.Minute)); len(rep.Minutes) != 1 || rep.Totals.Arrivals != 0 || rep.Totals.Admissions != 2 {
		t.Errorf("second minute alone: %+v", rep.Totals.Counts)
	}
	if rep := report(t, a, "nobody", t0, t0.Add(time.Hour)); len(rep.Minutes) != 0 || rep.Totals.Counts != (analytics.Counts{}) {
		t.Errorf("a room without events: %+v", rep)
	}
}

// testCounted: the queue's counted events add up per minute, their
// histograms merge with the per-visitor pairs' of older streams, a
// redelivered one counts once, and none enters the timeline.
func testCounted(t *testing.T, s analytics.Store) {
	a := analytics.New(s, analytics.Options{})
	t0 := Base()
	h11, h70 := hist.Bucket(11*time.Second), hist.Bucket(70*time.Second)
	c1 := Ev("c1", event.Counted, "r", t0.Add(time.Second), "", &event.Data{
		Arrivals: 400, Admissions: 20, Abandons: 3, Expired: 2, LeftActive: 1,
		Waits: 2, WaitSumMS: 22_000, WaitHist: map[int]int64{h11: 2}, ETAs: 1, ETAErrSumMS: -9_000, ETAAbsErrSumMS: 9_000,
	})
	c2 := Ev("c2", event.Counted, "r", t0.Add(2*time.Second), "", &event.Data{Arrivals: 100, Admissions: 5})
	c3 := Ev("c3", event.Counted, "r", t0.Add(time.Minute), "", &event.Data{
		Admissions: 1, Waits: 1, WaitSumMS: 70_000, WaitHist: map[int]int64{h70: 1},
	})
	old := Ev("old", event.Entered, "r", t0.Add(3*time.Second), "v1", nil) // an older instance's, in the same stream
	if got := apply(t, a, c1, c2, old); got.Applied != 3 {
		t.Fatalf("Apply = %+v, want 3 applied", got)
	}
	if got := apply(t, a, c2, c3); got.Applied != 1 || got.Duplicate != 1 {
		t.Fatalf("Apply with a redelivery = %+v, want 1 applied, 1 duplicate", got)
	}
	rep := report(t, a, "r", t0, t0.Add(10*time.Minute))
	if len(rep.Minutes) != 2 {
		t.Fatalf("%d minutes, want 2: %+v", len(rep.Minutes), rep.Minutes)
	}
	want0 := analytics.Counts{Arrivals: 501, Admissions: 25, Abandons: 3, Expired: 2, LeftActive: 1,
		Waits: 2, WaitSumMS: 22_000, ETAs: 1, ETAErrSumMS: -9_000, ETAAbsErrSumMS: 9_000}
	if diff := cmp.Diff(want0, rep.Minutes[0].Counts); diff != "" {
		t.Errorf("first minute -want +got:\n%s", diff)
	}
	d := rep.Totals.Derived
	if rep.Totals.Admissions != 26 || d.Waited != 3 || d.WaitAvgMS != 30_666 {
		t.Errorf("totals %+v: want 26 admissions, 3 waited, avg 30666 ms", rep.Totals)
	}
	within(t, "p50 of {11 s, 11 s, 70 s}", time.Duration(d.WaitP50MS)*time.Millisecond, 11*time.Second)
	within(t, "p99 of {11 s, 11 s, 70 s}", time.Duration(d.WaitP99MS)*time.Millisecond, 70*time.Second)
	page, _, err := a.Events(context.Background(), "r", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 1 || page[0].ID != "old" {
		t.Errorf("timeline %+v: want only the entered event, no counted one", page)
	}
}

// within fails unless got is within hist.RelativeError of want.
func within(tb testing.TB, what string, got, want time.Duration) {
	tb.Helper()
	if math.Abs(float64(got-want)) > hist.RelativeError*float64(want)+float64(time.Millisecond) {
		tb.Errorf("%s = %v, want %v within %.1f%%", what, got, want, 100*hist.RelativeError)
	}
}

func testIdempotent(t *testing.T, s analytics.Store) {
	a := analytics.New(s, analytics.Options{})
	t0 := Base()
	evs := Script("r", t0)
	apply(t, a, evs...)
	before := report(t, a, "r", t0, t0.Add(time.Hour))
	if got := apply(t, a, evs...); got.Applied != 0 || got.Duplicate != len(evs) {
		t.Errorf("the same batch again: %+v, want 0 applied, %d duplicates", got, len(evs))
	}
	// A batch that repeats one event and mixes old and new ones.
	extra := Ev("x1", event.Entered, "r", t0, "v9", nil)
	if got := apply(t, a, evs[0], extra, extra, evs[5]); got.Applied != 1 || got.Duplicate != 3 {
		t.Errorf("mixed batch: %+v, want 1 applied, 3 duplicates", got)
	}
	after := report(t, a, "r", t0, t0.Add(time.Hour))
	before.Totals.Arrivals++
	if diff := cmp.Diff(before.Totals, after.Totals); diff != "" {
		t.Errorf("after the duplicates, totals -want +got:\n%s", diff)
	}
	page, _, err := a.Events(context.Background(), "r", 0, analytics.MaxEvents)
	if err != nil || len(page) != len(evs)+1 {
		t.Errorf("timeline: %d events, %v; want %d (duplicates not kept twice)", len(page), err, len(evs)+1)
	}
}

func testPairs(t *testing.T, s analytics.Store) {
	a := analytics.New(s, analytics.Options{})
	t0 := Base()
	apply(t, a, Ev("a", event.Entered, "r", t0, "v", &event.Data{ETAMS: 1000}))
	apply(t, a, Ev("b", event.Entered, "r", t0.Add(time.Second), "w", nil))
	// A later entry of the same visitor (a new place) replaces the first;
	// an earlier one arriving late does not.
	apply(t, a, Ev("c", event.Entered, "r", t0.Add(2*time.Second), "v", &event.Data{ETAMS: 3000}),
		Ev("d", event.Entered, "r", t0.Add(-time.Second), "v", nil))
	apply(t, a, Ev("e", event.Admitted, "r", t0.Add(6*time.Second), "v", nil),
		Ev("f", event.Admitted, "r", t0.Add(7*time.Second), "v", nil)) // its entry was taken
	// An admission delivered before its entry (a redelivery reordered
	// them) pairs when the entry comes, in the admission's minute.
	late := t0.Add(90 * time.Second)
	apply(t, a, Ev("g", event.Admitted, "r", late, "x", nil))
	apply(t, a, Ev("h", event.Entered, "r", t0, "x", &event.Data{ETAMS: 80_000}))
	if m := report(t, a, "r", late.Truncate(time.Minute), late.Add(time.Minute)).Totals; m.Waited != 1 || m.WaitSumMS != 90_000 || m.ETAErrSumMS != 10_000 {
		t.Errorf("an admission before its entry: %+v, want one wait of 90 s in the admission's minute, ETA error +10 s", m)
	}
	c := report(t, a, "r", t0.Add(-time.Minute), t0.Add(time.Minute)).Totals.Counts
	if c.Admissions != 2 || c.Waits != 1 || c.WaitSumMS != 4000 || c.ETAErrSumMS != 1000 || c.Arrivals != 5 {
		t.Errorf("counts %+v: want 2 admissions, 1 wait of 4000 ms (ETA error +1000), 5 arrivals", c)
	}
}

func testQuantiles(t *testing.T, s analytics.Store) {
	a := analytics.New(s, analytics.Options{})
	t0 := Base()
	var evs []event.Event
	var waits []time.Duration
	for i := range 600 {
		// Minute i%10; waits from 0.1 s to about 17 min, skewed by minute.
		m := t0.Add(time.Duration(i%10) * time.Minute)
		w := time.Duration(100+i*i*3) * time.Millisecond
		v := fmt.Sprintf("v%d", i)
		evs = append(evs, Ev("in-"+v, event.Entered, "r", m.Add(-w), v, nil), Ev("ad-"+v, event.Admitted, "r", m, v, nil))
		waits = append(waits, w)
	}
	for chunk := range slices.Chunk(evs, 97) {
		apply(t, a, chunk...)
	}
	rep := report(t, a, "r", t0, t0.Add(10*time.Minute))
	if len(rep.Minutes) != 10 || rep.Totals.Waited != 600 {
		t.Fatalf("%d minutes, %d waited; want 10, 600", len(rep.Minutes), rep.Totals.Waited)
	}
	slices.Sort(waits)
	exact := func(q float64) time.Duration { return waits[int(math.Ceil(q*float64(len(waits))))-1] }
	d := rep.Totals.Derived
	within(t, "merged p50", time.Duration(d.WaitP50MS)*time.Millisecond, exact(0.5))
	within(t, "merged p90", time.Duration(d.WaitP90MS)*time.Millisecond, exact(0.9))
	within(t, "merged p99", time.Duration(d.WaitP99MS)*time.Millisecond, exact(0.99))
}

func testTimeline(t *testing.T, s analytics.Store) {
	const keep = 25
	a := analytics.New(s, analytics.Options{Recent: keep})
	t0 := Base()
	var all []event.Event
	for i := range 40 {
		e := Ev(fmt.Sprintf("t%02d", i), event.Entered, "r", t0.Add(time.Duration(i)*time.Second), fmt.Sprintf("v%d", i), &event.Data{ETAMS: int64(i)})
		all = append(all, e)
		apply(t, a, e, Ev(fmt.Sprintf("o%02d", i), event.Entered, "other", t0, "x", nil))
	}
	var got []event.Event
	var before int64
	for range 10 {
		page, next, err := a.Events(context.Background(), "r", before, 10)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if next == 0 {
			break
		}
		before = next
	}
	var want []event.Event
	for i := len(all) - 1; i >= len(all)-keep; i-- {
		want = append(want, all[i])
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("timeline (newest first, the %d newest) -want +got:\n%s", keep, diff)
	}
	if _, _, err := a.Events(context.Background(), "r", 0, analytics.MaxEvents+1); !errors.Is(err, analytics.ErrInvalid) {
		t.Errorf("limit %d: %v, want ErrInvalid", analytics.MaxEvents+1, err)
	}
}

func testPrune(t *testing.T, s analytics.Store) {
	now := time.Now().UTC().Truncate(time.Minute)
	clock := now
	var mu sync.Mutex
	a := analytics.New(s, analytics.Options{Retention: 48 * time.Hour, Dedupe: 24 * time.Hour, MaxWait: time.Hour,
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }})
	old := now.Add(-3 * time.Hour)
	apply(t, a, Ev("p1", event.Entered, "r", old, "v", nil), Ev("p2", event.Entered, "r", now.Add(-time.Minute), "w", nil))
	// Entries past MaxWait are dropped: v's admission is then unmatched.
	if err := a.Prune(context.Background()); err != nil {
		t.Fatal(err)
	}
	apply(t, a, Ev("p3", event.Admitted, "r", now, "v", nil), Ev("p4", event.Admitted, "r", now, "w", nil))
	c := report(t, a, "r", old, now.Add(time.Minute)).Totals.Counts
	if c.Arrivals != 2 || c.Admissions != 2 || c.Waits != 1 {
		t.Errorf("after pruning entries: %+v, want 2 arrivals, 2 admissions, 1 wait", c)
	}
	// Events older than Dedupe are ignored.
	if got := apply(t, a, Ev("p5", event.Entered, "r", now.Add(-25*time.Hour), "z", nil)); got.TooOld != 1 || got.Applied != 0 {
		t.Errorf("an event older than Dedupe: %+v, want too old", got)
	}
	// Three days later, the minute rows are past Retention.
	mu.Lock()
	clock = now.Add(72 * time.Hour)
	mu.Unlock()
	if err := a.Prune(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rep := report(t, a, "r", old, now.Add(time.Minute)); len(rep.Minutes) != 0 {
		t.Errorf("after Retention: %d minutes left", len(rep.Minutes))
	}
}

func testConcurrent(t *testing.T, s analytics.Store) {
	a := analytics.New(s, analytics.Options{})
	t0 := Base()
	var evs []event.Event
	for i := range 200 {
		v := fmt.Sprintf("v%d", i)
		evs = append(evs, Ev("c-in-"+v, event.Entered, "r", t0, v, nil), Ev("c-ad-"+v, event.Admitted, "r", t0.Add(time.Second), v, nil))
	}
	// Eight appliers, each with every event in its own order of batches.
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				lo := ((i + g) % 20) * 20
				if _, err := a.Apply(context.Background(), evs[lo:lo+20]); err != nil {
					t.Errorf("Apply: %v", err)
				}
			}
		})
	}
	wg.Wait()
	c := report(t, a, "r", t0, t0.Add(time.Minute)).Totals.Counts
	if c.Arrivals != 200 || c.Admissions != 200 || c.Waits != 200 || c.WaitSumMS != 200_000 {
		t.Errorf("after 8 concurrent appliers: %+v, want 200 arrivals, admissions and waits of 1 s, each once", c)
	}
}

func testInvalid(t *testing.T, s analytics.Store) {
	a := analytics.New(s, analytics.Options{})
	t0 := Base()
	for _, tc := range []struct{ from, to time.Time }{
		{t0, t0}, {t0, t0.Add(-time.Hour)}, {t0, t0.Add(analytics.MaxRange + time.Minute)},
	} {
		if _, err := a.Report(context.Background(), "r", tc.from, tc.to); !errors.Is(err, analytics.ErrInvalid) {
			t.Errorf("Report(%v, %v): %v, want ErrInvalid", tc.from, tc.to, err)
		}
	}
	if _, err := a.Apply(context.Background(), []event.Event{{ID: "x", Room: "r", Type: event.Entered}}); !errors.Is(err, analytics.ErrInvalid) {
		t.Errorf("an event without At: %v, want ErrInvalid", err)
	}
}
