package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/httpapi"
	"usher/internal/pow"
	"usher/internal/queue"
	"usher/internal/wire"
)

// TestOnePlacePerDefence (issue 30 §1) through the proxy, its page views
// and its API alike: a refused entry mints no visitor cookie, and a cookie
// minted by a room without defences (or by anything) skips none of another
// room's: without a solution no place; with one each, no more places than
// the room's client_enters_per_minute.
func TestOnePlacePerDefence(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{Routes: []Route{{"/free/", "free"}}}, func(c *Config) {
		withFlood(c)
		c.API = httpapi.NewServer(httpapi.Config{Queue: c.Queue, Keys: c.Keys, AdminKey: "admin",
			Registry: prometheus.NewRegistry(), InsecureCookies: true, Flood: c.Flood})
	})
	for room, set := range map[string]func(*queue.Settings){
		"sale": func(s *queue.Settings) { s.PowBits, s.ClientEntersPerMinute = 8, 5 },
		"free": func(s *queue.Settings) { s.PowBits, s.ClientEntersPerMinute = 0, 0 },
	} {
		s := queue.DefaultSettings()
		s.MaxActive, s.AdmitRate = 1, queue.MinAdmitRate
		set(&s)
		if err := e.q.PutRoom(t.Context(), room, s); err != nil {
			t.Fatal(err)
		}
		e.admit(room, "occupant", time.Time{})
	}
	asJSON := map[string]string{"Accept": "application/json"}
	with := func(h map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, r := range []struct{ method, path string }{
		{"POST", "/_usher/api/v1/rooms/no-such-room/entries"},
		{"POST", "/_usher/api/v1/rooms/sale/entries"},
		{"GET", "/shop"},
	} {
		res := do(t, http.DefaultClient, r.method, e.url+r.path, asJSON)
		if res.status < 400 || res.status == http.StatusTooManyRequests || cookieNamed(res.header, wire.VisitorCookie) != nil {
			t.Errorf("%s %s: %d, cookies %q; want a refusal and no visitor cookie", r.method, r.path, res.status, res.header.Values("Set-Cookie"))
		}
	}
	minted := func() string {
		res := do(t, http.DefaultClient, "GET", e.url+"/free/x", asJSON)
		c := cookieNamed(res.header, wire.VisitorCookie)
		if res.status != http.StatusTooManyRequests || c == nil {
			t.Fatalf("newcomer in the room without defences: %d %s", res.status, res.body)
		}
		return wire.VisitorCookie + "=" + c.Value
	}
	for range 4 {
		if res := do(t, http.DefaultClient, "GET", e.url+"/shop", with(asJSON, "Cookie", minted())); res.status != http.StatusPreconditionRequired {
			t.Fatalf("page view with another room's cookie, no solution: %d %s, want 428", res.status, res.body)
		}
		if res := do(t, http.DefaultClient, "POST", e.url+"/_usher/api/v1/rooms/sale/entries", with(asJSON, "Cookie", minted())); res.status != http.StatusPreconditionRequired {
			t.Fatalf("API entry with another room's cookie, no solution: %d %s, want 428", res.status, res.body)
		}
	}
	limited := 0
	for range 8 {
		c := challengeOf(t, e, "/shop")
		res := do(t, http.DefaultClient, "GET", e.url+"/shop", with(asJSON, "Cookie", minted(), pow.Header, c.Token+":"+pow.Solve(c)))
		switch {
		case res.status == http.StatusTooManyRequests && strings.Contains(res.body, "rate_limited"):
			limited++
		case res.status != http.StatusTooManyRequests || !strings.Contains(res.body, `"state":"waiting"`):
			t.Fatalf("solved entry with a fresh cookie: %d %s", res.status, res.body)
		}
	}
	if n := e.waiting("sale"); n != 5 || limited != 3 {
		t.Errorf("%d waiting in sale, %d refused rate_limited; want the limit 5 and 3 refused", n, limited)
	}
}
