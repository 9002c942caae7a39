package sale_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"usher/internal/booking"
	"usher/internal/booking/sqlitebooking"
	"usher/internal/event"
	"usher/internal/hold/memhold"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/sale"
	"usher/internal/testenv"
)

// recorder is an event.Emitter that keeps what it is given.
type recorder struct {
	mu     sync.Mutex
	events []event.Event
}

func (r *recorder) Emit(e event.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// summary lists the events as "type visitor data", checking their room.
func (r *recorder) summary(t *testing.T, room string) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e.Room != room || e.ID == "" || e.At.IsZero() {
			t.Errorf("event %+v: want room %s, an id and a time", e, room)
		}
		var d event.Data
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Errorf("event %+v: %v", e, err)
		}
		out = append(out, fmt.Sprintf("%s %s schedule=%d units=%d reservation=%s", e.Type, e.Visitor, d.Schedule, d.Units, d.Reservation))
	}
	return out
}

// TestEvents: holds placed and released (by the visitor, and by the
// consumer for a rejected reservation), and reservations submitted, each
// once; a retry with the same idempotency key and a confirmed sale's
// consumed hold emit nothing.
func TestEvents(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, 4)
	s1, s2, s3 := r.seats[0], r.seats[1], r.seats[2]
	if _, err := r.svc.Hold(ctx, r.sched.ID, "alice", []int64{s1, s2}); err != nil {
		t.Fatal(err)
	}
	res, created, err := r.svc.Reserve(ctx, "alice", r.sched.ID, []int64{s1, s2}, "k1")
	if err != nil || !created {
		t.Fatalf("Reserve = %v, %v", created, err)
	}
	if _, again, err := r.svc.Reserve(ctx, "alice", r.sched.ID, []int64{s1, s2}, "k1"); err != nil || again {
		t.Fatalf("Reserve again = %v, %v; want the first, not created", again, err)
	}
	if got := r.wait(t, "alice", res.ID); got.Status != booking.Confirmed {
		t.Fatalf("alice's reservation %s", got.Status)
	}

	bob, err := r.svc.Hold(ctx, r.sched.ID, "bob", []int64{s3})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.svc.Release(ctx, r.sched.ID, "bob", bob.ID); err != nil {
		t.Fatal(err)
	}
	// carol holds s3, but SQL sells it to someone else first: her
	// reservation is rejected and the consumer releases her hold.
	if _, err := r.svc.Hold(ctx, r.sched.ID, "carol", []int64{s3}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.catalog.Decide(ctx, []booking.Reservation{{ID: "elsewhere", Visitor: "x", ScheduleID: r.sched.ID, SeatIDs: []int64{s3}}}); err != nil {
		t.Fatal(err)
	}
	rej, _, err := r.svc.Reserve(ctx, "carol", r.sched.ID, []int64{s3}, "k2")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.wait(t, "carol", rej.ID); got.Status != booking.Rejected {
		t.Fatalf("carol's reservation %s, want rejected", got.Status)
	}
	sch := r.sched.ID
	want := []string{
		fmt.Sprintf("hold_placed alice schedule=%d units=2 reservation=", sch),
		fmt.Sprintf("reservation_submitted alice schedule=%d units=2 reservation=%s", sch, res.ID),
		fmt.Sprintf("hold_placed bob schedule=%d units=1 reservation=", sch),
		fmt.Sprintf("hold_released bob schedule=%d units=1 reservation=", sch),
		fmt.Sprintf("hold_placed carol schedule=%d units=1 reservation=", sch),
		fmt.Sprintf("reservation_submitted carol schedule=%d units=1 reservation=%s", sch, rej.ID),
		fmt.Sprintf("hold_released carol schedule=%d units=1 reservation=", sch),
	}
	testenv.Eventually(t, time.Minute, "the consumer's release of carol's hold", func() bool {
		return len(r.events.summary(t, r.sched.Room)) >= len(want)
	})
	if diff := cmp.Diff(want, r.events.summary(t, r.sched.Room)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestHoldExpiredEvents: a hold that lapses is reported once, as
// hold_expired at its expiry, by ReportLapsed (whichever Service asks
// first); a released hold never is.
func TestHoldExpiredEvents(t *testing.T) {
	ctx := context.Background()
	catalog, err := sqlitebooking.Open(ctx, filepath.Join(t.TempDir(), "booking.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { catalog.Close() })
	var mu sync.Mutex
	now := time.Now().UTC().Truncate(time.Millisecond)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	holds, events := memhold.New(), &recorder{}
	newService := func() *sale.Service {
		return sale.New(sale.Config{Catalog: catalog, Holds: holds, Queue: queue.New(memqueue.New(), queue.Options{}),
			Events: events, Now: clock, HoldTTL: time.Minute, SnapshotEvery: time.Nanosecond})
	}
	a, b := newService(), newService() // two instances on one hold store
	c, err := a.CreateConcert(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := a.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	seats, err := a.AddSeats(ctx, sch.ID, sale.SeatLayout{Sections: []string{"A"}, Rows: 1, SeatsPerRow: 3, Price: 100})
	if err != nil {
		t.Fatal(err)
	}
	alice, err := a.Hold(ctx, sch.ID, "alice", seats[:2])
	if err != nil {
		t.Fatal(err)
	}
	bob, err := a.Hold(ctx, sch.ID, "bob", seats[2:])
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, sch.ID, "bob", bob.ID); err != nil {
		t.Fatal(err)
	}
	for _, svc := range []*sale.Service{a, b} {
		if err := svc.ReportLapsed(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	for _, svc := range []*sale.Service{b, a, b} {
		if err := svc.ReportLapsed(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		fmt.Sprintf("hold_placed alice schedule=%d units=2 reservation=", sch.ID),
		fmt.Sprintf("hold_placed bob schedule=%d units=1 reservation=", sch.ID),
		fmt.Sprintf("hold_released bob schedule=%d units=1 reservation=", sch.ID),
		fmt.Sprintf("hold_expired alice schedule=%d units=2 reservation=", sch.ID),
	}
	if diff := cmp.Diff(want, events.summary(t, sch.Room)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	events.mu.Lock()
	last := events.events[len(events.events)-1]
	events.mu.Unlock()
	if !last.At.Equal(alice.ExpiresAt) {
		t.Errorf("hold_expired at %v, want the hold's expiry %v", last.At, alice.ExpiresAt)
	}
}
