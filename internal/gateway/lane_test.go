package gateway

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"usher/internal/queue"
	"usher/internal/token"
	"usher/internal/wire"
)

// TestLaneThroughProxy: lane codes minted by the admin endpoint put
// browsers that follow ?usher_lane= links into the room's priority lane,
// as many as the code's uses; at the room's share they overtake the main
// line, within the cap, and the rest of the line waits its turn.
func TestLaneThroughProxy(t *testing.T) {
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	s := queue.DefaultSettings()
	s.State, s.MaxActive, s.AdmitRate, s.Interval, s.PriorityShare = queue.Paused, 4, 40, 100*time.Millisecond, 0.5
	if err := e.q.PutRoom(t.Context(), "sale", s); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", e.url+Prefix+"api/v1/rooms/sale/invites", strings.NewReader(`{"count":1,"lane":true,"uses":2}`))
	req.Header.Set("Authorization", "Bearer admin")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var codes wire.Invites
	err = json.NewDecoder(res.Body).Decode(&codes)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusCreated || !codes.Lane || codes.Uses != 2 || len(codes.Invites) != 1 {
		t.Fatalf("lane codes: %d %+v %v", res.StatusCode, codes, err)
	}
	code := url.QueryEscape(codes.Invites[0])
	asJSON := map[string]string{"Accept": "application/json"}

	mains := make([]*http.Client, 4)
	for i := range mains {
		mains[i] = browser(t)
		if r := do(t, mains[i], "GET", e.url+"/shop", asJSON); r.status != http.StatusTooManyRequests {
			t.Fatalf("main %d: %d %s", i+1, r.status, r.body)
		}
	}
	lanes := make([]*http.Client, 2)
	for i := range lanes {
		lanes[i] = browser(t)
		r := do(t, lanes[i], "GET", e.url+"/shop?usher_lane="+code, asJSON)
		if want := `"position":` + string(rune('1'+i)); r.status != http.StatusTooManyRequests || !strings.Contains(r.body, want) {
			t.Fatalf("lane %d: %d %s, want waiting with %s (in the lane)", i+1, r.status, r.body, want)
		}
	}
	if r := do(t, browser(t), "GET", e.url+"/shop?usher_lane="+code, asJSON); r.status != http.StatusGone || !strings.Contains(r.body, "lane_code_used") {
		t.Errorf("a third use of a 2-use code: %d %s, want 410 lane_code_used", r.status, r.body)
	}
	expired := e.keys.SignLaneCode(token.LaneCode{Room: "sale", ID: token.NewInviteID(), Uses: 5, ExpiresAt: time.Now().Add(-time.Minute)})
	if r := do(t, browser(t), "GET", e.url+"/shop?usher_lane="+url.QueryEscape(expired), asJSON); r.status != http.StatusUnauthorized || !strings.Contains(r.body, "token_expired") {
		t.Errorf("an expired code: %d %s, want 401 token_expired", r.status, r.body)
	}
	if r := do(t, lanes[1], "GET", e.url+"/shop", asJSON); !strings.Contains(r.body, `"position":2`) {
		t.Errorf("the second lane visitor's poll: %d %s, want position 2 (exact, in the lane)", r.status, r.body)
	}
	if page := do(t, lanes[0], "GET", e.url+"/shop?x=1&usher_lane="+code, nil); strings.Contains(page.body, "usher_lane") || !strings.Contains(page.body, "/shop?x=1") {
		t.Errorf("the waiting page keeps the lane code in its URL, or lost the rest:\n%.300s", page.body)
	}
	if v, err := e.q.Room(t.Context(), "sale"); err != nil || v.Lane != 2 || v.Waiting != 6 {
		t.Errorf("room: lane %d, waiting %d (%v); want 2 and 6", v.Lane, v.Waiting, err)
	}

	s.State = queue.Open
	if err := e.q.PutRoom(t.Context(), "sale", s); err != nil {
		t.Fatal(err)
	}
	got, err := e.q.Admit(t.Context(), "sale")
	if err != nil {
		t.Fatal(err)
	}
	// The cap (4) bounds the step; the lane's half overtakes m3 and m4.
	if len(got.Admitted) != 4 {
		t.Fatalf("admitted %v, want four", got.Admitted)
	}
	for i, c := range lanes {
		if r := do(t, c, "GET", e.url+"/shop", nil); r.status != http.StatusOK || r.body != "origin /shop" {
			t.Errorf("lane visitor %d after the step: %d %.200s, want the origin", i+1, r.status, r.body)
		}
	}
	for i, c := range mains {
		r := do(t, c, "GET", e.url+"/shop", asJSON)
		switch admitted := r.status == http.StatusOK; {
		case i < 2 && !admitted:
			t.Errorf("main visitor %d after the step: %d %s, want admitted", i+1, r.status, r.body)
		case i >= 2 && (admitted || !strings.Contains(r.body, `"position":`+string(rune('1'+i-2)))):
			t.Errorf("main visitor %d after the step: %d %s, want waiting at %d", i+1, r.status, r.body, i-1)
		}
	}
}

// TestLaneThroughAuth: behind nginx or Caddy (usher auth), a lane code in
// the original request's target puts the visitor in the priority lane,
// ahead of the main line at the room's share 1.
func TestLaneThroughAuth(t *testing.T) {
	for _, tc := range []struct{ path, flavour string }{{WaitPath, "nginx"}, {AuthPath, "caddy"}} {
		e := newAuthEnv(t, Rules{Gate: []string{"/shop/"}})
		s := queue.DefaultSettings()
		s.MaxActive, s.PriorityShare = 1, 1
		if err := e.q.PutRoom(t.Context(), "sale", s); err != nil {
			t.Fatal(err)
		}
		e.pass("sale", "occupant", time.Time{})
		asJSON := map[string]string{"Accept": "application/json"}
		if res, body := e.ask(tc.path, tc.flavour, "GET", "/shop/x", asJSON); res.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, `"position":1`) {
			t.Fatalf("%s main line: %d %s", tc.path, res.StatusCode, body)
		}
		code := e.keys.SignLaneCode(token.LaneCode{Room: "sale", ID: "auth", Uses: 1, ExpiresAt: time.Now().Add(time.Hour)})
		res, body := e.ask(tc.path, tc.flavour, "GET", "/shop/x?usher_lane="+url.QueryEscape(code), asJSON)
		if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, `"position":1`) {
			t.Fatalf("%s lane: %d %s, want waiting first in the lane", tc.path, res.StatusCode, body)
		}
		var ticket string
		for _, c := range res.Cookies() {
			if c.Name == wire.RoomTicketCookie("sale") {
				ticket = c.Name + "=" + c.Value
			}
		}
		if err := e.q.Leave(t.Context(), "sale", "occupant"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.q.Admit(t.Context(), "sale"); err != nil {
			t.Fatal(err)
		}
		if res, _ := e.ask(tc.path, tc.flavour, "GET", "/shop/x", map[string]string{"Cookie": ticket}); res.StatusCode != http.StatusSeeOther {
			t.Errorf("%s: the lane visitor after the step: %d, want admitted ahead of the main line (303)", tc.path, res.StatusCode)
		}
	}
}
