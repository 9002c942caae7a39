package gateway

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"usher/internal/wire"
)

// TestProxyHoldsShownPlace: the proxy's JSON polls honour the place a
// client last showed (wire.ShownHeader), as the API's do, and refuse a
// malformed one.
func TestProxyHoldsShownPlace(t *testing.T) {
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	e.admit("sale", "first", time.Time{}) // takes the only slot
	poll := func(ticket, shown string) (int, wire.Entry) {
		t.Helper()
		req, err := http.NewRequest("GET", e.url+"/cart", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/json")
		if ticket != "" {
			req.Header.Set("Authorization", "Bearer "+ticket)
		}
		if shown != "" {
			req.Header.Set(wire.ShownHeader, shown)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var got wire.Entry
		json.NewDecoder(res.Body).Decode(&got)
		return res.StatusCode, got
	}
	var third wire.Entry
	for range 3 {
		_, third = poll("", "")
	}
	if third.Position != 3 || third.Ticket == "" {
		t.Fatalf("third entry through the proxy: %+v, want position 3 with a ticket", third)
	}
	if status, got := poll(third.Ticket, ""); status != http.StatusTooManyRequests || got.Position != 3 {
		t.Errorf("poll without the header: %d %+v, want 429 at 3", status, got)
	}
	if status, got := poll(third.Ticket, "2"); status != http.StatusTooManyRequests || got.Position != 2 {
		t.Errorf("poll having shown 2: %d %+v, want 429 at 2 (the client's own place, held)", status, got)
	}
	if status, _ := poll(third.Ticket, "two"); status != http.StatusBadRequest {
		t.Errorf("poll with %s: two: %d, want 400", wire.ShownHeader, status)
	}
}
