package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
)

// TestRandomRoomDraw: a random room's newcomers behind the near zone are
// told they wait for their window's draw (position 0, the pre-queue's
// countdown to the window's end) and learn their place once it ends.
func TestRandomRoomDraw(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
	q := queue.New(memqueue.New(), queue.Options{Now: c.now})
	s := queue.DefaultSettings()
	s.State, s.AdmitRate, s.PresenceTimeout, s.Queueing = queue.Paused, 1, 0, queue.QueueRandom
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	v, _ := q.View("r")
	near := v.Near()
	entries := make([]queue.Entry, 100)
	inDraw := 0
	for i := range entries {
		e, _, err := q.Enter(ctx, "r", fmt.Sprintf("v%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if e.Position > near || int64(i) < s.Near() && e.Position != int64(i+1) {
			t.Fatalf("entry %d = %+v; want its place in the near zone (%d), else in the draw (position 0)", i, e, near)
		}
		if e.Position == 0 {
			inDraw++
		}
		entries[i] = e
	}
	// Those drawn into the places between the store's near zone and the
	// view's (a few) are told their place.
	if inDraw < 30 {
		t.Errorf("%d of 100 entries in the draw, want most of those behind the near zone (%d)", inDraw, near)
	}
	c.t = c.t.Add(20 * time.Second)
	last := 0 // an entrant in the draw: later ones only move it back
	for i, e := range entries {
		if e.Position == 0 {
			last = i
		}
	}
	p := q.Place("r", entries[last])
	if end := time.Date(2026, 11, 1, 10, 1, 0, 0, time.UTC); p.RoomState != string(queue.InDrawWindow) || !p.OpensAt.Equal(end) || p.ETA != 40*time.Second {
		t.Errorf("place in the draw = state %s, opens_at %v, ETA %v; want draw until %v, 40s", p.RoomState, p.OpensAt, p.ETA, end)
	}
	e, _, err := q.Status(ctx, "r", entries[last].Visitor, queue.TicketSeq(entries[last]), c.t.Add(-20*time.Second))
	if err != nil || e.Position != 0 || queue.TicketSeq(e) != queue.PreQueueSeq {
		t.Errorf("Status in the window = %+v, %v; want still in the draw", e, err)
	}
	c.t = c.t.Add(40 * time.Second)                // the window ends
	if err := q.PutRoom(ctx, "r", s); err != nil { // a refresh of the view
		t.Fatal(err)
	}
	seen := make(map[int64]bool)
	for i := range entries {
		e, _, err := q.Status(ctx, "r", fmt.Sprintf("v%d", i), queue.TicketSeq(entries[i]), c.t.Add(-time.Minute))
		if err != nil || e.Status != queue.Waiting || e.Position < 1 || e.Position > 100 || seen[e.Position] {
			t.Fatalf("Status of v%d after the draw = %+v, %v; want a place of its own in 1 to 100", i, e, err)
		}
		seen[e.Position] = true
	}
}

// TestRandomRoomOpeningDraw: in a random room with an opening, a
// pre-queue ticket polled after the opening learns the place the opening
// draw gave it, even while the current window waits for its own draw.
func TestRandomRoomOpeningDraw(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
	q := queue.New(memqueue.New(), queue.Options{Now: c.now})
	s := queue.DefaultSettings()
	s.State, s.AdmitRate, s.PresenceTimeout, s.Queueing, s.DrawWindow = queue.Paused, 1, 0, queue.QueueRandom, time.Hour
	s.OpensAt = c.t.Add(10 * time.Second)
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	issued := c.t
	for i := range 100 {
		if e, _, err := q.Enter(ctx, "r", fmt.Sprintf("p%d", i)); err != nil || queue.TicketSeq(e) != queue.PreQueueSeq {
			t.Fatalf("pre-queue entry: %+v, %v", e, err)
		}
	}
	c.t = s.OpensAt.Add(time.Second) // the same window of an hour
	for i := range 200 {
		if _, _, err := q.Enter(ctx, "r", fmt.Sprintf("w%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.PutRoom(ctx, "r", s); err != nil { // a refresh of the view
		t.Fatal(err)
	}
	e, _, err := q.Status(ctx, "r", "p5", queue.PreQueueSeq, issued)
	if err != nil || e.Status != queue.Waiting || e.Position < 1 || e.Position > 100 {
		t.Errorf("pre-queue ticket after the opening: %+v, %v; want its drawn place among the first 100", e, err)
	}
}
