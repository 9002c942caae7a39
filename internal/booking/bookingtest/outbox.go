package bookingtest

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"usher/internal/booking"
	"usher/internal/event"
)

// The outbox cases: every decision Decide stores writes its event in the
// same transaction, once; redeliveries write none; MarkSent removes.

// drainOutbox reads every event in the outbox, marking them sent as it
// goes, oldest first.
func drainOutbox(tb testing.TB, s booking.Store) []booking.OutboxEvent {
	tb.Helper()
	ctx := context.Background()
	var all []booking.OutboxEvent
	for {
		batch, err := s.Outbox(ctx, 100)
		if err != nil {
			tb.Fatalf("Outbox: %v", err)
		}
		if len(batch) == 0 {
			return all
		}
		seqs := make([]int64, len(batch))
		for i, e := range batch {
			seqs[i] = e.Seq
		}
		if err := s.MarkSent(ctx, seqs); err != nil {
			tb.Fatalf("MarkSent: %v", err)
		}
		all = append(all, batch...)
	}
}

// wantEvent is the outbox event of a decided reservation r in room, with
// amount (0: none).
func wantEvent(r booking.Reservation, room string, amount int64) event.Event {
	units := r.Quantity
	if units == 0 {
		units = int64(len(r.SeatIDs))
	}
	data, _ := json.Marshal(event.Data{Reservation: r.ID, Schedule: r.ScheduleID, Units: units, Amount: amount})
	return event.Event{
		ID: r.ID + "." + string(r.Status), Type: event.Type("reservation_" + string(r.Status)),
		Room: room, At: r.DecidedAt, Visitor: r.Visitor, Data: data,
	}
}

// normal decodes an event's Data, so that events compare whatever the
// order of the JSON's keys.
func normal(tb testing.TB, e event.Event) any {
	tb.Helper()
	var d event.Data
	if err := json.Unmarshal(e.Data, &d); err != nil {
		tb.Fatalf("event %s: data %q: %v", e.ID, e.Data, err)
	}
	e.Data = nil
	return struct {
		event.Event
		D event.Data
	}{e, d}
}

func testOutboxDecisions(t *testing.T, s booking.Store) {
	ctx := context.Background()
	sch, ids := catalog(t, s, 4) // 50,000 a seat
	setStock(t, s, sch.ID, 5)
	if got := drainOutbox(t, s); len(got) != 0 {
		t.Fatalf("a new store's outbox holds %d events", len(got))
	}
	batch := []booking.Reservation{
		pending("two", sch.ID, ids[0], ids[1]),
		pending("taken", sch.ID, ids[1]),
		pendingStock("stock", sch.ID, 3),
		pendingStock("over", sch.ID, 3),
		pending("elsewhere", sch.ID+1000, ids[2]),
	}
	got := decide(t, s, batch...)
	for i, st := range []booking.ReservationStatus{booking.Confirmed, booking.Rejected, booking.Confirmed, booking.Rejected, booking.Rejected} {
		if got[i].Status != st {
			t.Fatalf("setup: %s is %s, want %s", got[i].ID, got[i].Status, st)
		}
	}
	want := []event.Event{
		wantEvent(got[0], sch.Room, 100_000),
		wantEvent(got[1], sch.Room, 0),
		wantEvent(got[2], sch.Room, 0),
		wantEvent(got[3], sch.Room, 0),
		wantEvent(got[4], "schedule-"+itoa(sch.ID+1000), 0), // no such schedule: its default room
	}
	events := drainOutbox(t, s)
	if len(events) != len(want) {
		t.Fatalf("outbox holds %d events after deciding %d reservations, want one each: %+v", len(events), len(want), events)
	}
	byID := map[string]event.Event{}
	for i, e := range events {
		if i > 0 && e.Seq <= events[i-1].Seq {
			t.Errorf("outbox seqs not increasing: %d after %d", e.Seq, events[i-1].Seq)
		}
		byID[e.ID] = e.Event
	}
	for _, w := range want {
		e, ok := byID[w.ID]
		if !ok {
			t.Errorf("no event %s in the outbox", w.ID)
			continue
		}
		if !e.At.Equal(w.At) {
			t.Errorf("event %s at %v, want the decision time %v", w.ID, e.At, w.At)
		}
		e.At = w.At
		if diff := cmp.Diff(normal(t, w), normal(t, e)); diff != "" {
			t.Errorf("event %s (-want +got):\n%s", w.ID, diff)
		}
	}

	// Redelivered, before and after the events were sent: no new event.
	decide(t, s, batch...)
	if again := drainOutbox(t, s); len(again) != 0 {
		t.Errorf("a redelivery wrote %d events: %+v", len(again), again)
	}
	if err := s.MarkSent(ctx, []int64{events[0].Seq, 1 << 40}); err != nil {
		t.Errorf("MarkSent of events already removed: %v, want nil", err)
	}
}

// testOutboxRolledBack decides a batch in which a reservation loses one of
// two seats to an earlier one of the batch: the backends undo that
// reservation's partial sale (a savepoint, or the whole transaction decided
// again), and its rolled-back attempt must leave no event behind.
func testOutboxRolledBack(t *testing.T, s booking.Store) {
	sch, ids := catalog(t, s, 3)
	got := decide(t, s,
		pending("first", sch.ID, ids[1]),
		pending("partial", sch.ID, ids[0], ids[1]),
		pending("after", sch.ID, ids[0], ids[2]),
	)
	if got[0].Status != booking.Confirmed || got[1].Status != booking.Rejected || got[2].Status != booking.Confirmed {
		t.Fatalf("setup: %s %s %s, want confirmed rejected confirmed", got[0].Status, got[1].Status, got[2].Status)
	}
	count := map[string]int{}
	for _, e := range drainOutbox(t, s) {
		count[e.ID]++
	}
	want := map[string]int{"first.confirmed": 1, "partial.rejected": 1, "after.confirmed": 1}
	if diff := cmp.Diff(want, count); diff != "" {
		t.Errorf("events by id (-want +got):\n%s", diff)
	}
}

func testOutboxReads(t *testing.T, s booking.Store) {
	ctx := context.Background()
	if _, err := s.Outbox(ctx, 0); !errors.Is(err, booking.ErrInvalid) {
		t.Errorf("Outbox(limit 0) err = %v, want ErrInvalid", err)
	}
	if err := s.MarkSent(ctx, nil); err != nil {
		t.Errorf("MarkSent(nil) = %v", err)
	}
	sch, ids := catalog(t, s, 5)
	for i, id := range ids {
		decide(t, s, pending("r"+itoa(int64(i)), sch.ID, id))
	}
	first, err := s.Outbox(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 2 || first[0].ID != "r0.confirmed" || first[1].ID != "r1.confirmed" {
		t.Fatalf("Outbox(2) = %+v, want the two oldest (r0, r1)", first)
	}
	again, err := s.Outbox(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("Outbox read twice without MarkSent differs (-first +second):\n%s", diff)
	}
	if err := s.MarkSent(ctx, []int64{first[1].Seq}); err != nil { // out of order
		t.Fatal(err)
	}
	var left []string
	for _, e := range drainOutbox(t, s) {
		left = append(left, e.ID)
	}
	if diff := cmp.Diff([]string{"r0.confirmed", "r2.confirmed", "r3.confirmed", "r4.confirmed"}, left); diff != "" {
		t.Errorf("outbox after marking r1 sent (-want +got):\n%s", diff)
	}
}

// checkOutbox checks that the outbox holds exactly one event per stored
// reservation, of its status.
func checkOutbox(t *testing.T, s booking.Store, stored map[string]booking.Reservation) {
	t.Helper()
	seen := map[string]int{}
	for _, e := range drainOutbox(t, s) {
		seen[e.ID]++
		if n := seen[e.ID]; n == 2 {
			t.Errorf("event %s in the outbox twice", e.ID)
		}
	}
	for id, r := range stored {
		if seen[id+"."+string(r.Status)] != 1 {
			t.Errorf("reservation %s (%s): %d events %s.%s, want 1", id, r.Status, seen[id+"."+string(r.Status)], id, r.Status)
		}
	}
	if len(seen) != len(stored) {
		t.Errorf("%d distinct events for %d stored reservations", len(seen), len(stored))
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
