package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"usher/internal/token"
	"usher/internal/wire"
)

// seatEvent is one event of GET …/seats/events.
type seatEvent struct {
	name, id string
	status   wire.SeatMapStatus
}

// followSeats opens the seat status stream with bearer and extra headers,
// and returns its events as they come; the stream closes with the test or
// with stop. A refused stream answers its status and body instead.
func followSeats(t *testing.T, e *env, path, bearer string, header map[string]string) (events <-chan seatEvent, stop func(), refused resp) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+bearer)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := validated(t, e.srv.Client()).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		var b strings.Builder
		bufio.NewReader(res.Body).WriteTo(&b)
		res.Body.Close()
		cancel()
		return nil, cancel, resp{status: res.StatusCode, body: []byte(b.String()), header: res.Header}
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("seat events: Content-Type %q", ct)
	}
	out := make(chan seatEvent)
	go func() {
		defer res.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		var ev seatEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.status); err != nil {
					t.Errorf("event data %q: %v", line, err)
				}
			case line == "" && ev.name != "":
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
				ev = seatEvent{}
			}
		}
	}()
	return out, cancel, resp{status: 200}
}

// nextSeatEvent returns the stream's next event. The bound only turns a
// hang into a failure; the tests assert order and versions, not time.
func nextSeatEvent(t *testing.T, events <-chan seatEvent) seatEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("the seat event stream ended")
		}
		if ev.name != "seats" || ev.id != ev.status.Version {
			t.Fatalf("event %q id %q for version %q, want seats named by its version", ev.name, ev.id, ev.status.Version)
		}
		return ev
	case <-time.After(time.Minute):
		t.Fatal("no seat event within a minute")
	}
	return seatEvent{}
}

// changeOf reads events until one's changes list seat in the state
// named by pick; each event must continue from the one before (since =
// the previous version).
func changeOf(t *testing.T, events <-chan seatEvent, prev string, seats []int64, pick func(*wire.SeatChanges) []int64) seatEvent {
	t.Helper()
	for {
		ev := nextSeatEvent(t, events)
		if ev.status.Since != prev || ev.status.Changes == nil {
			t.Fatalf("event since %q (changes %v), want the change since the previous event %q", ev.status.Since, ev.status.Changes, prev)
		}
		if got := pick(ev.status.Changes); slices.Equal(got, seats) {
			return ev
		} else if len(got) > 0 {
			t.Fatalf("event changes %+v, want %v together", *ev.status.Changes, seats)
		}
		prev = ev.status.Version
	}
}

// TestSeatEvents: a follower gets the full status, then each hold and
// release as a change since the event before, in order; a reconnecting
// one (Last-Event-ID) starts from its version; every event names the
// status GET …/seats/status answers at that version.
func TestSeatEvents(t *testing.T) {
	t.Parallel()
	e := newBookingEnv(t)
	sch := e.newSchedule(t, "c", `{}`)
	// Enough seats that a change of two is shorter than the full status
	// (a full status may stand in for a longer change).
	e.do(nil, "POST", fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID), adminKey, `{"sections":["A"],"rows":20,"seats_per_row":25}`)
	e.putRoom(sch.Room, `{"max_active":10,"admit_rate":100}`)
	alice := e.do(nil, "POST", "/api/v1/rooms/"+sch.Room+"/entries", adminKey, `{"visitor_id":"alice"}`).entry(t)
	bob := e.do(nil, "POST", "/api/v1/rooms/"+sch.Room+"/entries", adminKey, `{"visitor_id":"bob"}`).entry(t)
	path := fmt.Sprintf("/api/v1/schedules/%d/seats/events", sch.ID)

	events, _, r := followSeats(t, e, path, alice.Pass, nil)
	if r.status != 200 {
		t.Fatalf("follow: %d %s", r.status, r.body)
	}
	first := nextSeatEvent(t, events)
	if first.status.Status == "" || first.status.Changes != nil || first.status.Seats != 500 {
		t.Fatalf("first event %+v, want the full status of 500 seats", first.status)
	}

	r = e.do(nil, "POST", fmt.Sprintf("/api/v1/schedules/%d/holds", sch.ID), bob.Pass, `{"seat_ids":[3,4]}`)
	if r.status != 201 {
		t.Fatalf("hold: %d %s", r.status, r.body)
	}
	h := decodeInto[wire.Hold](t, r)
	held := changeOf(t, events, first.status.Version, []int64{3, 4}, func(c *wire.SeatChanges) []int64 { return c.Held })

	// The same change by ?since= on the poll: one version, one status.
	r = e.do(nil, "GET", fmt.Sprintf("/api/v1/schedules/%d/seats/status?since=%s", sch.ID, first.status.Version), adminKey, "")
	if polled := decodeInto[wire.SeatMapStatus](t, r); polled.Version != held.status.Version {
		t.Errorf("status version %s after the hold, the stream said %s", polled.Version, held.status.Version)
	}

	// A browser reconnecting after the first event resumes from it.
	again, _, r := followSeats(t, e, path, alice.Pass, map[string]string{"Last-Event-ID": first.id})
	if r.status != 200 {
		t.Fatalf("reconnect: %d %s", r.status, r.body)
	}
	if ev := nextSeatEvent(t, again); ev.status.Since != first.id || ev.status.Changes == nil || !slices.Equal(ev.status.Changes.Held, []int64{3, 4}) {
		t.Errorf("reconnected with Last-Event-ID %s: %+v, want the hold as a change since it", first.id, ev.status)
	}

	if r := e.do(nil, "DELETE", fmt.Sprintf("/api/v1/schedules/%d/holds/%s", sch.ID, h.HoldID), bob.Pass, ""); r.status != 204 {
		t.Fatalf("release: %d %s", r.status, r.body)
	}
	changeOf(t, events, held.status.Version, []int64{3, 4}, func(c *wire.SeatChanges) []int64 { return c.Available })
}

// TestSeatEventsEndWithThePass: a pass's stream ends when the pass
// expires (a browser reconnecting then needs a new pass).
func TestSeatEventsEndWithThePass(t *testing.T) {
	t.Parallel()
	e := newBookingEnv(t)
	sch := e.newSchedule(t, "c", `{}`)
	e.do(nil, "POST", fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID), adminKey, `{"sections":["A"],"rows":1,"seats_per_row":3}`)
	pass, err := e.keys.SignPass(token.Pass{Room: sch.Room, Visitor: "alice", ExpiresAt: time.Now().Add(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	events, _, r := followSeats(t, e, fmt.Sprintf("/api/v1/schedules/%d/seats/events", sch.ID), pass, nil)
	if r.status != 200 {
		t.Fatalf("follow: %d %s", r.status, r.body)
	}
	nextSeatEvent(t, events)
	for ev := range events { // until the stream ends
		if ev.status.Changes != nil && len(ev.status.Changes.Held)+len(ev.status.Changes.Sold)+len(ev.status.Changes.Available) > 0 {
			t.Errorf("a change nobody made: %+v", ev.status)
		}
	}
}

// TestSeatEventsBounded: seat streams count against the reservation
// streams' bounds: a visitor's fifth open stream is 429 rate_limited,
// and one closed makes room again. Bad input is refused before a stream.
func TestSeatEventsBounded(t *testing.T) {
	t.Parallel()
	e := newBookingEnv(t)
	sch := e.newSchedule(t, "c", `{}`)
	e.do(nil, "POST", fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID), adminKey, `{"sections":["A"],"rows":1,"seats_per_row":3}`)
	e.putRoom(sch.Room, `{"max_active":10,"admit_rate":100}`)
	alice := e.do(nil, "POST", "/api/v1/rooms/"+sch.Room+"/entries", adminKey, `{"visitor_id":"alice"}`).entry(t)
	bob := e.do(nil, "POST", "/api/v1/rooms/"+sch.Room+"/entries", adminKey, `{"visitor_id":"bob"}`).entry(t)
	path := fmt.Sprintf("/api/v1/schedules/%d/seats/events", sch.ID)

	var stops []func()
	for range 4 {
		events, stop, r := followSeats(t, e, path, alice.Pass, nil)
		if r.status != 200 {
			t.Fatalf("stream %d: %d %s", len(stops)+1, r.status, r.body)
		}
		nextSeatEvent(t, events) // the stream is counted once it answers
		stops = append(stops, stop)
	}
	_, _, r := followSeats(t, e, path, alice.Pass, nil)
	if r.status != 429 || r.errorCode(t) != "rate_limited" || r.header.Get("Retry-After") == "" {
		t.Fatalf("fifth stream: %d %s, want 429 rate_limited with Retry-After", r.status, r.body)
	}
	if events, _, r := followSeats(t, e, path, bob.Pass, nil); r.status != 200 {
		t.Errorf("another visitor's stream: %d %s", r.status, r.body)
	} else {
		nextSeatEvent(t, events)
	}
	stops[0]()
	for i := 0; ; i++ { // the server counts the stream back once it sees it closed
		events, _, r := followSeats(t, e, path, alice.Pass, nil)
		if r.status == 200 {
			nextSeatEvent(t, events)
			break
		}
		if r.status != 429 || i == 5000 {
			t.Fatalf("after closing one: %d %s", r.status, r.body)
		}
		time.Sleep(time.Millisecond)
	}

	for _, tc := range []struct {
		name, path, bearer string
		status             int
		code               string
	}{
		{"no credentials", path, "", 403, "not_admitted"},
		{"a forged pass", path, "t1.nope.nope.nope", 401, "token_invalid"},
		{"bad schedule id", "/api/v1/schedules/x/seats/events", alice.Pass, 400, "invalid_request"},
		{"unknown schedule", "/api/v1/schedules/999/seats/events", adminKey, 404, "not_found"},
	} {
		_, _, r := followSeats(t, e, tc.path, tc.bearer, nil)
		if r.status != tc.status || r.errorCode(t) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
	}
}
