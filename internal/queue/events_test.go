package queue_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	events "usher/internal/event"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
)

// recorder is an events.Emitter that keeps what it is given.
type recorder struct {
	mu     sync.Mutex
	events []events.Event
}

func (r *recorder) Emit(e events.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) reset() {
	r.mu.Lock()
	r.events = nil
	r.mu.Unlock()
}

// took returns the events since the last call, as (type, visitor, data)
// triples, and checks what every event must have.
func (r *recorder) took(t *testing.T, room string, at time.Time) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	ids := map[string]bool{}
	for _, e := range r.events {
		if e.ID == "" || ids[e.ID] || e.Room != room || !e.At.Equal(at) {
			t.Errorf("event %+v: want a fresh id, room %s, at %v", e, room, at)
		}
		ids[e.ID] = true
		var d events.Data
		if len(e.Data) > 0 {
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Errorf("event %+v: %v", e, err)
			}
		}
		s := string(e.Type) + " " + e.Visitor
		switch {
		case d.ETAMS > 0:
			s += " eta"
		case d.From != "":
			s += " from " + d.From
		case d.Count > 0 || d.Removed > 0:
			s += " " + string(rune('0'+d.Count)) + "/" + string(rune('0'+d.Removed))
		}
		out = append(out, s)
	}
	r.events = nil
	return out
}

func TestEvents(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)}
	rec := &recorder{}
	q := queue.New(memqueue.New(), queue.Options{Now: c.now, Events: rec})
	s := queue.DefaultSettings()
	s.State, s.AdmitRate, s.Interval, s.MaxActive = queue.Paused, 2, time.Second, 3
	s.PresenceTimeout = 0
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	step := func(what string, want []string, f func()) {
		t.Helper()
		f()
		if diff := cmp.Diff(want, rec.took(t, "r", c.t)); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", what, diff)
		}
	}
	enter := func(v string) {
		t.Helper()
		if _, _, err := q.Enter(ctx, "r", v); err != nil {
			t.Fatal(err)
		}
	}
	admit := func() {
		t.Helper()
		if _, err := q.Admit(ctx, "r"); err != nil {
			t.Fatal(err)
		}
	}
	leave := func(v string) {
		t.Helper()
		if err := q.Leave(ctx, "r", v); err != nil {
			t.Fatal(err)
		}
	}
	step("new places", []string{"entered a eta", "entered b eta", "entered c eta", "entered d eta"}, func() {
		for _, v := range []string{"a", "b", "c", "d"} {
			enter(v)
		}
	})
	step("entering again", nil, func() { enter("a") })
	step("a paused step", nil, admit)
	s.State = queue.Open
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	step("a step", []string{"admitted a", "admitted b"}, admit)
	step("leaving the line", []string{"left d from waiting"}, func() { leave("d") })
	step("leaving again", nil, func() { leave("d") })
	step("leaving the active set", []string{"left a from active"}, func() { leave("a") })
	c.t = c.t.Add(time.Second)
	step("the next step", []string{"admitted c"}, admit)
	c.t = c.t.Add(s.ClaimWindow + time.Second) // b and c never claimed their slots
	step("expiry", []string{"expired  2/0"}, admit)
	step("a passthrough entry", []string{"entered e", "admitted e"}, func() { enter("e") })
}

// TestEventsSkipped: a step that parks absent visitors emits one skipped
// event with the counts.
func TestEventsSkipped(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)}
	rec := &recorder{}
	q := queue.New(memqueue.New(), queue.Options{Now: c.now, Events: rec})
	s := queue.DefaultSettings()
	s.State, s.AdmitRate, s.Interval, s.MaxActive, s.PresenceTimeout = queue.Paused, 1, time.Second, 100, 10*time.Second
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b", "c"} {
		if _, _, err := q.Enter(ctx, "r", v); err != nil {
			t.Fatal(err)
		}
	}
	s.State = queue.Open
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Admit(ctx, "r"); err != nil { // admits a; b and c are watched from now
		t.Fatal(err)
	}
	c.t = c.t.Add(s.PresenceTimeout + time.Second)
	if _, _, err := q.Status(ctx, "r", "c", 3, c.t); err != nil { // c polls, b does not
		t.Fatal(err)
	}
	rec.reset()
	res, err := q.Admit(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped != 1 {
		t.Fatalf("setup: step %+v, want b skipped", res)
	}
	if diff := cmp.Diff([]string{"admitted c", "skipped  1/0"}, rec.took(t, "r", c.t)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
