package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/wire"
)

// The opening draw, black-box: a pre-queue with a countdown, a commitment
// published before the opening, positions in draw order after it, and the
// seed that proves the order.
func TestOpeningDraw(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	start := time.Date(2026, 12, 24, 9, 0, 0, 0, time.UTC)
	clock.Store(start.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	e := newEnvClock(t, memqueue.New(), false, now)
	opens := start.Add(time.Hour)

	r := e.do(nil, "PUT", "/api/v1/rooms/sale", adminKey, `{"opens_at":"2026-12-24T19:00:00.000+09:00","max_active":100}`)
	var room wire.Room
	if err := json.Unmarshal(r.body, &room); r.status != 201 || err != nil || setting[string](room.Settings, "opens_at") != "2026-12-24T10:00:00Z" {
		t.Fatalf("PUT with opens_at: %d %s", r.status, r.body)
	}
	draw := func() wire.Draw {
		t.Helper()
		r := e.do(nil, "GET", "/api/v1/rooms/sale/draw", "", "")
		var d wire.Draw
		if err := json.Unmarshal(r.body, &d); r.status != 200 || err != nil {
			t.Fatalf("GET draw: %d %s", r.status, r.body)
		}
		return d
	}
	before := draw()
	if before.Drawn || before.Seed != "" || len(before.Commitment) != 64 || before.Entrants != 0 || !before.OpensAt.Equal(opens) {
		t.Fatalf("draw before the opening = %+v, want a commitment, no seed", before)
	}

	// Five visitors enter before the opening: a countdown, no position.
	var (
		clients  = []int{0, 1, 2, 3, 4}
		jars     = make([]*wireClient, len(clients))
		visitors []string
	)
	for i := range clients {
		jars[i] = &wireClient{c: e.client()}
		r := e.do(jars[i].c, "POST", "/api/v1/rooms/sale/entries", "", "")
		got := r.entry(t)
		if r.status != 201 || got.State != "waiting" || got.RoomState != "pre_queue" || got.Position != 0 ||
			got.OpensAt == nil || !got.OpensAt.Equal(opens) || got.ETASeconds != 3600 || got.PollAfterMS < 0 || got.PollAfterMS > 9600 {
			t.Fatalf("enter before the opening: %d %s", r.status, r.body)
		}
		jars[i].ticket = got.Ticket
		tk, err := e.keys.ParseTicket(got.Ticket, "sale")
		if err != nil {
			t.Fatal(err)
		}
		visitors = append(visitors, tk.Visitor)
	}
	if r := e.do(jars[0].c, "GET", "/api/v1/rooms/sale/entries/me", "", ""); r.status != 200 || r.entry(t).RoomState != "pre_queue" || r.entry(t).Ticket != "" {
		t.Fatalf("status before the opening: %d %s", r.status, r.body)
	}
	if d := draw(); d.Entrants != 5 || d.Commitment != before.Commitment {
		t.Fatalf("draw with five entrants = %+v", d)
	}
	// The opening moves; the commitment stays.
	e.putRoom("sale", `{"opens_at":"2026-12-24T10:30:00Z"}`)
	opens = opens.Add(30 * time.Minute)
	if d := draw(); d.Commitment != before.Commitment || !d.OpensAt.Equal(opens) {
		t.Fatalf("draw after moving the opening = %+v", d)
	}

	// The opening: a late visitor queues behind the drawn five.
	clock.Store(opens.UnixNano())
	late := e.client()
	if r := e.do(late, "POST", "/api/v1/rooms/sale/entries", "", ""); r.status != 201 || r.entry(t).Position != 6 || r.entry(t).RoomState != "open" {
		t.Fatalf("enter at the opening: %d %s, want position 6 in an open room", r.status, r.body)
	}
	after := draw()
	seed, err := hex.DecodeString(after.Seed)
	sum := sha256.Sum256(seed)
	if !after.Drawn || err != nil || hex.EncodeToString(sum[:]) != before.Commitment || after.Entrants != 5 {
		t.Fatalf("draw after the opening = %+v, want a seed whose SHA-256 is the commitment %s", after, before.Commitment)
	}
	order := queue.DrawOrder(seed, visitors)
	for i, v := range visitors {
		r := e.do(jars[i].c, "GET", "/api/v1/rooms/sale/entries/me", "", "")
		got := r.entry(t)
		if want := int64(slices.Index(order, v) + 1); r.status != 200 || got.Position != want || got.Ticket == "" {
			t.Errorf("status after the draw: %d %s, want position %d with a new ticket", r.status, r.body, want)
		}
		r = e.do(jars[i].c, "GET", "/api/v1/rooms/sale/entries/me", "", "")
		if r.entry(t).Ticket != "" {
			t.Errorf("second status after the draw issued another ticket: %s", r.body)
		}
	}
	// A room draws once.
	if r := e.do(nil, "PUT", "/api/v1/rooms/sale", adminKey, `{"opens_at":"2026-12-25T10:00:00Z"}`); r.status != 400 || r.errorCode(t) != "invalid_request" {
		t.Errorf("moving the opening after the draw: %d %s, want 400", r.status, r.body)
	}
}

type wireClient struct {
	c      *http.Client
	ticket string
}

func TestDrawBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.putRoom("plain", `{}`)
	for _, body := range []string{`{"opens_at":"tomorrow"}`, `{"opens_at":"1999-12-31T23:59:59Z"}`, `{"opens_at":"3000-01-01T00:00:00Z"}`, `{"opens_at":5}`} {
		if r := e.do(nil, "PUT", "/api/v1/rooms/plain", adminKey, body); r.status != 400 {
			t.Errorf("PUT %s: %d %s, want 400", body, r.status, r.body)
		}
	}
	if r := e.do(nil, "GET", "/api/v1/rooms/plain/draw", "", ""); r.status != 404 || r.errorCode(t) != "draw_not_found" {
		t.Errorf("draw of a room without opens_at: %d %s", r.status, r.body)
	}
	if r := e.do(nil, "GET", "/api/v1/rooms/nowhere/draw", "", ""); r.status != 404 || r.errorCode(t) != "room_not_found" {
		t.Errorf("draw of an unknown room: %d %s", r.status, r.body)
	}
}
