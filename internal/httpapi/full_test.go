package httpapi_test

import (
	"encoding/json"
	"testing"

	"usher/internal/wire"
)

// A full line refuses new entries with 429 queue_full and Retry-After,
// and creates nothing; a visitor already in line keeps its place.
func TestQueueFull(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.putRoom("sale", `{"max_active":1,"max_waiting":1}`)
	a, b, c := e.client(), e.client(), e.client()
	if r := e.do(a, "POST", "/api/v1/rooms/sale/entries", "", ""); r.status != 201 || r.entry(t).State != "admitted" {
		t.Fatalf("first entry: %d %s", r.status, r.body)
	}
	if r := e.do(b, "POST", "/api/v1/rooms/sale/entries", "", ""); r.status != 201 || r.entry(t).Position != 1 {
		t.Fatalf("second entry: %d %s", r.status, r.body)
	}
	r := e.do(c, "POST", "/api/v1/rooms/sale/entries", "", "")
	if r.status != 429 || r.errorCode(t) != "queue_full" || r.header.Get("Retry-After") != "10" {
		t.Fatalf("entry into a full line: %d %s (Retry-After %q), want 429 queue_full with Retry-After 10", r.status, r.body, r.header.Get("Retry-After"))
	}
	if r := e.do(b, "POST", "/api/v1/rooms/sale/entries", "", ""); r.status != 200 || r.entry(t).Position != 1 {
		t.Errorf("re-entry of the visitor in line: %d %s, want 200 at 1", r.status, r.body)
	}
	r = e.do(nil, "GET", "/api/v1/rooms/sale", adminKey, "")
	var room wire.Room
	if err := json.Unmarshal(r.body, &room); err != nil || room.Stats.Waiting != 1 || setting[int64](room.Settings, "max_waiting") != 1 {
		t.Errorf("room after a refused entry: %s, want 1 waiting", r.body)
	}
}

func TestAdmissionSettingsBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.putRoom("r", `{}`)
	for _, body := range []string{`{"max_waiting":-1}`, `{"max_waiting":100000001}`, `{"presence_timeout_seconds":4}`,
		`{"presence_timeout_seconds":3601}`, `{"presence_timeout_seconds":-10}`, `{"presence_timeout_seconds":1e300}`} {
		if r := e.do(nil, "PUT", "/api/v1/rooms/r", adminKey, body); r.status != 400 || r.errorCode(t) != "invalid_request" {
			t.Errorf("PUT %s: %d %s, want 400", body, r.status, r.body)
		}
	}
	r := e.do(nil, "PUT", "/api/v1/rooms/r", adminKey, `{"presence_timeout_seconds":0,"max_waiting":0}`)
	var room wire.Room
	if err := json.Unmarshal(r.body, &room); r.status != 200 || err != nil || setting[float64](room.Settings, "presence_timeout_seconds") != 0 {
		t.Errorf("PUT presence off: %d %s", r.status, r.body)
	}
}
