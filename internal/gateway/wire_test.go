package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"usher/internal/queue"
	"usher/internal/wire"
)

// jsonCall sends a request as a JSON client, with bearer (if any) as the
// Authorization, and returns the status and the decoded body.
func jsonCall(t *testing.T, method, url, bearer string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if res.StatusCode != http.StatusNoContent {
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, url, res.StatusCode, b, err)
		}
	}
	return res.StatusCode, body
}

// TestAPIAndProxyAgree pins that the API's status answer and the proxy's
// JSON waiting protocol are the same JSON for the same entry, in every room
// state, for a waiting visitor and for one whose place is gone, but for
// the proxy's eta_text. poll_after_ms carries jitter, so it is compared by
// range.
func TestAPIAndProxyAgree(t *testing.T) {
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	ctx := context.Background()
	e.admit("sale", "first", time.Time{}) // takes the only slot
	status, entered := jsonCall(t, "GET", e.url+"/cart", "")
	ticket, _ := entered["ticket"].(string)
	if status != http.StatusTooManyRequests || ticket == "" {
		t.Fatalf("enter through the proxy: %d %v, want 429 with a ticket", status, entered)
	}
	apiURL := e.url + Prefix + "api/v1/rooms/sale/entries/me"

	setState := func(state queue.RoomState) {
		t.Helper()
		s := queue.DefaultSettings()
		s.MaxActive, s.State = 1, state
		if err := e.q.PutRoom(ctx, "sale", s); err != nil {
			t.Fatal(err)
		}
	}
	agree := func(name string, wantState string, pollMin, pollMax float64) {
		t.Helper()
		_, api := jsonCall(t, "GET", apiURL, ticket)
		_, proxy := jsonCall(t, "GET", e.url+"/cart", ticket)
		// The proxy adds the waiting page's words for the wait and the
		// people ahead, and only for a place in line.
		text, _ := proxy["eta_text"].(string)
		if (wantState == wire.StateWaiting) != strings.Contains(text, "minute") {
			t.Errorf("%s: proxy eta_text = %q, want the wait in words exactly while waiting", name, text)
		}
		ahead, _ := proxy["ahead_text"].(string)
		if (wantState == wire.StateWaiting) != strings.Contains(ahead, "ahead of you") {
			t.Errorf("%s: proxy ahead_text = %q, want the people ahead in words exactly while waiting", name, ahead)
		}
		delete(proxy, "eta_text")
		delete(proxy, "ahead_text")
		for who, body := range map[string]map[string]any{"API": api, "proxy": proxy} {
			poll, _ := body["poll_after_ms"].(float64)
			if poll < pollMin || poll > pollMax {
				t.Errorf("%s: %s poll_after_ms = %v, want %v to %v", name, who, poll, pollMin, pollMax)
			}
			delete(body, "poll_after_ms")
			if body["state"] != wantState {
				t.Errorf("%s: %s state = %v, want %s", name, who, body["state"], wantState)
			}
		}
		if diff := cmp.Diff(api, proxy); diff != "" {
			t.Errorf("%s: API and proxy disagree (-API +proxy):\n%s", name, diff)
		}
	}
	near := func(ms float64) (float64, float64) { return 0.8 * ms, 1.2 * ms }

	lo, hi := near(1500)
	for _, state := range []queue.RoomState{queue.Open, queue.Paused, queue.Closed, queue.SoldOut} {
		setState(state)
		want := wire.StateWaiting
		if state.Refuses() {
			want = string(state)
		}
		agree("waiting, "+string(state), want, lo, hi)
	}
	// A visitor whose place is gone, in a room that refuses newcomers:
	// nothing to poll for.
	if status, body := jsonCall(t, "DELETE", apiURL, ticket); status != http.StatusNoContent {
		t.Fatalf("leave: %d %v", status, body)
	}
	for _, state := range []queue.RoomState{queue.Closed, queue.SoldOut} {
		setState(state)
		agree("gone, "+string(state), string(state), 0, 0)
	}
}

// TestSoldOutNewcomerJSON: a newcomer to a sold-out room learns it through
// the JSON waiting protocol as the sold_out state (409), not as an error.
func TestSoldOutNewcomerJSON(t *testing.T) {
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	for _, state := range []queue.RoomState{queue.Closed, queue.SoldOut} {
		s := queue.DefaultSettings()
		s.State = state
		if err := e.q.PutRoom(context.Background(), "sale", s); err != nil {
			t.Fatal(err)
		}
		status, body := jsonCall(t, "GET", e.url+"/cart", "")
		if status != http.StatusConflict || body["state"] != string(state) || body["room_state"] != string(state) || body["poll_after_ms"] != 0.0 {
			t.Errorf("newcomer, %s room: %d %v, want 409 with state and room_state %s, poll_after_ms 0", state, status, body, state)
		}
	}
}
