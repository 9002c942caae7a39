package httpapi_test

import (
	"encoding/json"
	"testing"
	"time"

	"usher/internal/token"
)

// TestLaneCodes: the invites endpoint signs lane codes of a number of
// uses; an entry with one waits in the room's priority lane (position
// within the lane, re-entry keeps it), a code used up answers 410
// lane_code_used, an expired one 401 token_expired, and a room without a
// lane 409 lanes_off.
func TestLaneCodes(t *testing.T) {
	e := newFloodEnv(t)
	e.putRoom("sale", `{"max_active":1,"admit_rate":0.001,"priority_share":0.25}`)
	e.putRoom("plain", `{}`)
	for _, body := range []string{`{"count":1,"uses":3}`, `{"count":1,"lane":true,"uses":-1}`, `{"count":1,"lane":true,"uses":1000001}`} {
		if r := e.do(nil, "POST", "/api/v1/rooms/sale/invites", adminKey, body); r.status != 400 {
			t.Errorf("invites %s: %d %s, want 400", body, r.status, r.body)
		}
	}
	r := e.do(nil, "POST", "/api/v1/rooms/sale/invites", adminKey, `{"count":1,"lane":true,"uses":2}`)
	var codes struct {
		Invites []string
		Lane    bool
		Uses    int64
	}
	if err := json.Unmarshal(r.body, &codes); err != nil || r.status != 201 || !codes.Lane || codes.Uses != 2 || len(codes.Invites) != 1 {
		t.Fatalf("lane codes: %d %s", r.status, r.body)
	}
	body := `{"lane":"` + codes.Invites[0] + `"}`
	if r := e.do(nil, "POST", "/api/v1/rooms/sale/entries", "", ""); r.status != 201 { // takes the one slot
		t.Fatalf("first entry: %d %s", r.status, r.body)
	}
	e.do(nil, "POST", "/api/v1/rooms/sale/entries", "", "") // waits in the main line
	a := e.client()
	first := e.do(a, "POST", "/api/v1/rooms/sale/entries", "", body)
	again := e.do(a, "POST", "/api/v1/rooms/sale/entries", "", body)
	var place struct{ Position int64 }
	json.Unmarshal(again.body, &place)
	if first.status != 201 || again.status != 200 || place.Position != 1 {
		t.Errorf("a lane entry, then again: %d then %d %s; want 201, then 200 at position 1 of the lane", first.status, again.status, again.body)
	}
	if r := e.do(nil, "POST", "/api/v1/rooms/sale/entries", "", body); r.status != 201 {
		t.Errorf("the code's second use: %d %s, want 201", r.status, r.body)
	}
	if r := e.do(nil, "POST", "/api/v1/rooms/sale/entries", "", body); r.status != 410 || r.errorCode(t) != "lane_code_used" {
		t.Errorf("the code's third use: %d %s, want 410 lane_code_used", r.status, r.body)
	}
	expired := e.keys.SignLaneCode(token.LaneCode{Room: "sale", ID: "x", Uses: 1, ExpiresAt: time.Now().Add(-time.Second)})
	if r := e.do(nil, "POST", "/api/v1/rooms/sale/entries", "", `{"lane":"`+expired+`"}`); r.status != 401 || r.errorCode(t) != "token_expired" {
		t.Errorf("an expired code: %d %s, want 401 token_expired", r.status, r.body)
	}
	plain := e.keys.SignLaneCode(token.LaneCode{Room: "plain", ID: "y", Uses: 1, ExpiresAt: time.Now().Add(time.Hour)})
	if r := e.do(nil, "POST", "/api/v1/rooms/plain/entries", "", `{"lane":"`+plain+`"}`); r.status != 409 || r.errorCode(t) != "lanes_off" {
		t.Errorf("a room without a lane: %d %s, want 409 lanes_off", r.status, r.body)
	}
	var room struct {
		Stats struct{ Waiting, Lane int64 }
	}
	r = e.do(nil, "GET", "/api/v1/rooms/sale", adminKey, "")
	if err := json.Unmarshal(r.body, &room); err != nil || room.Stats.Lane != 2 || room.Stats.Waiting != 3 {
		t.Errorf("room stats: %s, want lane 2 of waiting 3", r.body)
	}
}
