package httpapi_test

import (
	"sync/atomic"
	"testing"
	"time"

	"usher/internal/queue/memqueue"
)

// TestQueueingMethods switches one room through the queueing methods by
// the API, entering and polling as visitors do.
func TestQueueingMethods(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 24, 9, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	e := newEnvClock(t, memqueue.New(), false, now)
	e.putRoom("m", `{"state":"paused","admit_rate":1,"presence_timeout_seconds":0,"queueing":"random","draw_window_seconds":3600}`)
	var tickets []string
	inDraw := 0
	for i := range 80 {
		r := e.do(e.client(), "POST", "/api/v1/rooms/m/entries", "", "")
		got := r.entry(t)
		if r.status != 201 || got.State != "waiting" || got.Ticket == "" {
			t.Fatalf("enter #%d into a random room: %d %s", i, r.status, r.body)
		}
		if got.Position == 0 {
			inDraw++
			if got.RoomState != "draw" || got.OpensAt == nil || got.OpensAt.Unix()%3600 != 0 {
				t.Errorf("enter #%d in the draw: %s, want draw until the end of its window (a whole hour)", i, r.body)
			}
		}
		tickets = append(tickets, got.Ticket)
	}
	if inDraw == 0 {
		t.Errorf("no entry of 80 waits for the draw (near zone about 52)")
	}

	// reject: newcomers see the room closed; those waiting keep their places.
	e.putRoom("m", `{"state":"open","queueing":"reject"}`)
	if r := e.do(e.client(), "POST", "/api/v1/rooms/m/entries", "", ""); r.status != 409 || r.errorCode(t) != "room_closed" {
		t.Errorf("enter into a reject room: %d %s, want 409 room_closed", r.status, r.body)
	}
	if r := e.do(nil, "GET", "/api/v1/rooms/m/entries/me", tickets[0], ""); r.status != 200 || r.entry(t).Position != 1 {
		t.Errorf("status of the first in a reject room: %d %s, want waiting at 1", r.status, r.body)
	}

	// passthrough: the next step admits the whole line, past max_active;
	// newcomers are admitted at once.
	e.putRoom("m", `{"queueing":"passthrough","max_active":10}`)
	if _, err := e.q.Admit(t.Context(), "m"); err != nil {
		t.Fatal(err)
	}
	clock.Add(int64(time.Second)) // the bucket refills between steps
	if _, err := e.q.Admit(t.Context(), "m"); err != nil {
		t.Fatal(err)
	}
	for i, tk := range tickets {
		if r := e.do(nil, "GET", "/api/v1/rooms/m/entries/me", tk, ""); r.status != 200 || r.entry(t).State != "admitted" {
			t.Fatalf("status of #%d after a passthrough step: %d %s, want admitted", i, r.status, r.body)
		}
	}
	if r := e.do(e.client(), "POST", "/api/v1/rooms/m/entries", "", ""); r.status != 201 || r.entry(t).State != "admitted" || r.entry(t).Pass == "" {
		t.Errorf("enter into a passthrough room: %d %s, want admitted with a pass", r.status, r.body)
	}
}
