package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/queue/redisqueue"
	"usher/internal/testenv"
	"usher/internal/wire"
)

// TestPausedRoomGhosts is issue 21 §2 as it was found, black-box: a room
// paused with 10 entries, 5 of which poll every 0.5 s for 7 s
// (presence_timeout 5 s) and 5 never; on opening, the steps admit the 5
// present, not the 10 (admitted_total 5).
func TestPausedRoomGhosts(t *testing.T) {
	t.Parallel()
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		testPausedRoomGhosts(t, memqueue.New())
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		c := testenv.Redis(t)
		testPausedRoomGhosts(t, redisqueue.New(c, testenv.RedisPrefix(t, c)))
	})
}

func testPausedRoomGhosts(t *testing.T, qs queue.Store) {
	var clock atomic.Int64
	start := time.Date(2026, 12, 24, 9, 0, 0, 0, time.UTC)
	clock.Store(start.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	e := newEnvClock(t, qs, false, now)
	e.putRoom("sale", `{"state":"paused","presence_timeout_seconds":5,"admit_rate":100,"interval_ms":100,"max_active":100}`)

	clients := make([]*http.Client, 10)
	for i := range clients {
		clients[i] = e.client()
		if r := e.do(clients[i], "POST", "/api/v1/rooms/sale/entries", "", ""); r.status != 201 || r.entry(t).Position != int64(i+1) {
			t.Fatalf("enter %d: %d %s", i, r.status, r.body)
		}
	}
	step := func() {
		t.Helper()
		if _, err := e.q.Admit(context.Background(), "sale"); err != nil {
			t.Fatal(err)
		}
	}
	// The scheduler steps a paused room someone waits in; the even
	// clients poll, the odd ones closed their tab.
	for at := time.Duration(0); at <= 7*time.Second; at += 500 * time.Millisecond {
		clock.Store(start.Add(at).UnixNano())
		for i := 0; i < len(clients) && at > 0; i += 2 {
			if r := e.do(clients[i], "GET", "/api/v1/rooms/sale/entries/me", "", ""); r.status != 200 || r.entry(t).State != "waiting" {
				t.Fatalf("poll of client %d while paused: %d %s", i, r.status, r.body)
			}
		}
		step()
	}
	e.putRoom("sale", `{"state":"open"}`)
	for range 4 { // a few steps: the first has tokens for all 10
		step()
		clock.Store(now().Add(100 * time.Millisecond).UnixNano())
	}
	r := e.do(nil, "GET", "/api/v1/rooms/sale", adminKey, "")
	var room wire.Room
	if err := json.Unmarshal(r.body, &room); r.status != 200 || err != nil {
		t.Fatalf("GET room: %d %s", r.status, r.body)
	}
	if room.Stats.AdmittedTotal != 5 {
		t.Errorf("admitted_total after the opening = %d, want 5 (the present, not the ghosts)", room.Stats.AdmittedTotal)
	}
	for i, c := range clients {
		got := e.do(c, "GET", "/api/v1/rooms/sale/entries/me", "", "").entry(t)
		switch {
		case i%2 == 0 && got.State != "admitted":
			t.Errorf("present client %d after the opening: %+v, want admitted", i, got)
		case i%2 == 1 && got.State != "waiting":
			t.Errorf("ghost %d back after the opening: %+v, want waiting (parked, back at its poll)", i, got)
		}
	}
}
