package sale_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/booking"
	"usher/internal/booking/sqlitebooking"
	"usher/internal/hold"
)

// metricValue returns the value of the series of name whose labels are
// labels (name=value pairs), and whether reg has it.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// TestMetrics: holds placed and refused, holds ended, reservations
// submitted, confirmed and rejected with their reason, the held seats and
// the consumer's backlog show in the registry.
func TestMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	catalog, err := sqlitebooking.Open(ctx, filepath.Join(t.TempDir(), "booking.db"))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r := newRigMetrics(t, 8, catalog, reg)
	want := func(v float64, name string, labels ...string) {
		t.Helper()
		if got, ok := metricValue(t, reg, name, labels...); !ok || got != v {
			t.Errorf("%s%v = %v (present %v), want %v", name, labels, got, ok, v)
		}
	}
	eventually := func(v float64, name string, labels ...string) {
		t.Helper()
		waitFor(t, fmt.Sprintf("%s%v = %v", name, labels, v), func() bool {
			got, ok := metricValue(t, reg, name, labels...)
			return ok && got == v
		})
	}
	s := r.seats
	sched := fmt.Sprint(r.sched.ID)
	if _, _, err := r.q.Enter(ctx, r.sched.Room, "alice"); err != nil {
		t.Fatal(err)
	}

	if _, err := r.svc.Hold(ctx, r.sched.ID, "alice", []int64{s[0], s[1]}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.Hold(ctx, r.sched.ID, "bob", []int64{s[1]}); !errors.Is(err, hold.ErrTaken) {
		t.Fatalf("bob holds alice's seat: %v, want taken", err)
	}
	if _, err := r.svc.Hold(ctx, r.sched.ID, "alice", []int64{s[2], s[3], s[4]}); !errors.Is(err, hold.ErrLimit) {
		t.Fatalf("alice holds 5 seats: %v, want the limit", err)
	}
	if _, err := r.svc.Hold(ctx, r.sched.ID, "bob", []int64{s[0], s[0]}); err == nil {
		t.Fatal("a seat twice: want invalid")
	}
	want(1, "usher_holds_total", "kind", "seats", "result", "placed")
	want(1, "usher_holds_total", "kind", "seats", "result", "taken")
	want(1, "usher_holds_total", "kind", "seats", "result", "limit")
	if _, err := r.svc.SeatMap(ctx, r.sched.ID); err != nil {
		t.Fatal(err)
	}
	want(2, "usher_held_seats", "schedule", sched)

	res, _, err := r.svc.Reserve(ctx, "alice", r.sched.ID, []int64{s[0], s[1]}, "k1")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.wait(t, "alice", res.ID); got.Status != booking.Confirmed {
		t.Fatalf("alice's reservation: %+v", got)
	}
	// A retry with the same key is no second submission.
	if _, created, err := r.svc.Reserve(ctx, "alice", r.sched.ID, []int64{s[0], s[1]}, "k1"); err != nil || created {
		t.Fatalf("retry: created %v, %v", created, err)
	}
	eventually(1, "usher_hold_ends_total", "how", "consumed")

	// Bob holds seat 3, which SQL sells to a reservation that never held
	// it (the hold store lost it): bob's reservation is rejected.
	if _, err := r.svc.Hold(ctx, r.sched.ID, "bob", []int64{s[2]}); err != nil {
		t.Fatal(err)
	}
	rogue := booking.Reservation{ID: "rogue", Visitor: "rogue", ScheduleID: r.sched.ID, SeatIDs: []int64{s[2]},
		Status: booking.Pending, CreatedAt: time.Now().UTC()}
	if _, _, err := r.broker.Submit(ctx, rogue, "k"); err != nil {
		t.Fatal(err)
	}
	r.wait(t, "rogue", rogue.ID)
	bobs, _, err := r.svc.Reserve(ctx, "bob", r.sched.ID, []int64{s[2]}, "k1")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.wait(t, "bob", bobs.ID); got.Status != booking.Rejected {
		t.Fatalf("bob's reservation: %+v, want rejected", got)
	}
	eventually(1, "usher_hold_ends_total", "how", "returned")

	carol, err := r.svc.Hold(ctx, r.sched.ID, "carol", []int64{s[5]})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.svc.Release(ctx, r.sched.ID, "carol", carol.ID); err != nil {
		t.Fatal(err)
	}
	want(1, "usher_hold_ends_total", "how", "released")

	if _, err := r.svc.SetStock(ctx, r.sched.ID, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.HoldStock(ctx, r.sched.ID, "dave", 2); !errors.Is(err, hold.ErrSoldOut) {
		t.Fatalf("2 units of 1: %v, want sold out", err)
	}
	if _, err := r.svc.HoldStock(ctx, r.sched.ID, "dave", 5); !errors.Is(err, hold.ErrLimit) {
		t.Fatalf("5 units: %v, want the limit", err)
	}
	if _, err := r.svc.HoldStock(ctx, r.sched.ID, "dave", 1); err != nil {
		t.Fatal(err)
	}
	want(1, "usher_holds_total", "kind", "stock", "result", "sold_out")
	want(1, "usher_holds_total", "kind", "stock", "result", "limit")
	want(1, "usher_holds_total", "kind", "stock", "result", "placed")

	// Submitted counts this instance's two requests, not the rogue one the
	// test published itself; the consumer decided all three.
	want(2, "usher_reservations_total", "outcome", "submitted")
	want(2, "usher_reservations_total", "outcome", "confirmed")
	want(1, "usher_reservations_total", "outcome", "rejected", "reason", booking.ReasonSeatTaken)
	if n, ok := metricValue(t, reg, "usher_reservation_batch_seconds"); !ok || n < 1 {
		t.Errorf("usher_reservation_batch_seconds has %v observations, want at least 1", n)
	}
	eventually(0, "usher_reservation_backlog", "state", "waiting")
	eventually(0, "usher_reservation_backlog", "state", "in_flight")
	eventually(0, "usher_reservation_backlog_oldest_seconds")
}
