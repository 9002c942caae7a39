package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"usher/internal/clientip"
	"usher/internal/flood"
	"usher/internal/limit/memlimit"
	"usher/internal/pow"
	"usher/internal/queue"
	"usher/internal/wire"
)

// withFlood turns the flood guard on, on the memory limit store.
func withFlood(c *Config) {
	limits := memlimit.New()
	c.Flood = flood.New(limits, pow.New(c.Keys, limits, time.Now), clientip.Trusted{}, time.Now)
}

// newPowEnv is a proxy whose rooms "sale" (every path but /b/) and "room-b"
// (/b/) ask bits of proof of work; one visitor holds sale's one slot, so
// newcomers wait.
func newPowEnv(t *testing.T, bits int) *env {
	t.Helper()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{Routes: []Route{{"/b/", "room-b"}}}, withFlood)
	for _, room := range []string{"sale", "room-b"} {
		s := queue.DefaultSettings()
		s.MaxActive, s.AdmitRate, s.PowBits = 1, queue.MinAdmitRate, int64(bits)
		if err := e.q.PutRoom(t.Context(), room, s); err != nil {
			t.Fatal(err)
		}
	}
	e.admit("sale", "occupant", time.Time{})
	return e
}

// waiting is the number of visitors waiting in room.
func (e *env) waiting(room string) int64 {
	e.t.Helper()
	v, err := e.q.Room(e.t.Context(), room)
	if err != nil {
		e.t.Fatal(err)
	}
	return v.Waiting
}

// challengeOf asks path as a JSON client without a solution and returns
// the challenge of the 428 answer.
func challengeOf(t *testing.T, e *env, path string) pow.Challenge {
	t.Helper()
	res := do(t, http.DefaultClient, "GET", e.url+path, map[string]string{"Accept": "application/json"})
	var body struct {
		Error     struct{ Code string }
		Challenge pow.Challenge
	}
	if err := json.Unmarshal([]byte(res.body), &body); err != nil || res.status != http.StatusPreconditionRequired ||
		body.Error.Code != "challenge_required" || body.Challenge.Token == "" {
		t.Fatalf("GET %s as JSON without a solution: %d %s, want 428 challenge_required with a challenge", path, res.status, res.body)
	}
	return body.Challenge
}

// TestProofOfWorkPage: a browser without a place in a room with pow_bits
// gets the waiting page's challenge state (428), and nothing is made: no
// visitor cookie, no place. HEAD still never takes a place or a challenge.
func TestProofOfWorkPage(t *testing.T) {
	t.Parallel()
	e := newPowEnv(t, 8)
	res := do(t, http.DefaultClient, "GET", e.url+"/shop?item=1", nil)
	if res.status != http.StatusPreconditionRequired {
		t.Fatalf("newcomer's page: %d, want 428:\n%.500s", res.status, res.body)
	}
	for _, want := range []string{`data-state="challenge"`, `id="work"`, `"state":"challenge"`, `"bits":8`, `"token":"c1.`, `"worker":"/_usher/pow.js"`, `"url":"/shop?item=1"`, "Getting your place in line"} {
		if !strings.Contains(res.body, want) {
			t.Errorf("challenge page lacks %s", want)
		}
	}
	if strings.Contains(res.body, "http-equiv") {
		t.Error("challenge page reloads by itself: a reload only brings a new challenge")
	}
	if got := res.header.Values("Set-Cookie"); len(got) != 0 {
		t.Errorf("challenge page sets cookies %q, want none", got)
	}
	if res := do(t, http.DefaultClient, "HEAD", e.url+"/shop", nil); res.status != http.StatusMethodNotAllowed {
		t.Errorf("HEAD without a place: %d, want 405", res.status)
	}
	if n := e.waiting("sale"); n != 0 {
		t.Errorf("%d waiting after challenge pages, want 0", n)
	}
}

// TestProofOfWorkJSON: the proxy's JSON clients get the API's 428 body; a
// solved challenge takes exactly one place; a replay, another room's
// challenge and garbage are 401 challenge_invalid (JSON) or the error page
// (HTML), and make nothing; a visitor with its cookies is never asked again.
func TestProofOfWorkJSON(t *testing.T) {
	t.Parallel()
	e := newPowEnv(t, 8)
	asJSON := func(c *http.Client, path, solution string) response {
		h := map[string]string{"Accept": "application/json"}
		if solution != "" {
			h[pow.Header] = solution
		}
		return do(t, c, "GET", e.url+path, h)
	}

	c := challengeOf(t, e, "/shop")
	if c.Bits != 8 {
		t.Errorf("challenge of %d bits, want the room's 8", c.Bits)
	}
	solution := c.Token + ":" + pow.Solve(c)
	visitor := browser(t)
	res := asJSON(visitor, "/shop", solution)
	if res.status != http.StatusTooManyRequests || !strings.Contains(res.body, `"position":1`) {
		t.Fatalf("solved: %d %s, want 429 waiting at position 1", res.status, res.body)
	}
	if cookieNamed(res.header, wire.VisitorCookie) == nil || cookieNamed(res.header, wire.RoomTicketCookie("sale")) == nil {
		t.Errorf("solved: cookies %q, want the visitor and ticket cookies", res.header.Values("Set-Cookie"))
	}
	// The visitor's cookies carry it from now on: never asked again.
	for _, accept := range []string{"application/json", "text/html"} {
		if res := do(t, visitor, "GET", e.url+"/shop", map[string]string{"Accept": accept}); res.status != http.StatusTooManyRequests {
			t.Errorf("the visitor again (%s): %d, want 429 waiting, not a challenge:\n%.300s", accept, res.status, res.body)
		}
	}

	other := challengeOf(t, e, "/b/seats")
	fresh := challengeOf(t, e, "/shop")
	wrong := "x"
	for pow.Solves(fresh.Token, wrong, fresh.Bits) {
		wrong += "x"
	}
	for name, sol := range map[string]string{
		"replayed":          solution,
		"other room's":      other.Token + ":" + pow.Solve(other),
		"garbage":           "garbage",
		"wrong nonce":       fresh.Token + ":" + wrong,
		"token of the page": fresh.Token,
	} {
		if res := asJSON(browser(t), "/shop", sol); res.status != http.StatusUnauthorized || !strings.Contains(res.body, `"challenge_invalid"`) {
			t.Errorf("%s solution: %d %s, want 401 challenge_invalid", name, res.status, res.body)
		}
		res := do(t, browser(t), "GET", e.url+"/shop", map[string]string{pow.Header: sol})
		if res.status != http.StatusUnauthorized || !strings.Contains(res.body, `data-state="error"`) || len(res.header.Values("Set-Cookie")) != 0 {
			t.Errorf("%s solution, browser: %d, cookies %q, want 401 and the error page:\n%.300s", name, res.status, res.header.Values("Set-Cookie"), res.body)
		}
	}
	if n := e.waiting("sale"); n != 1 {
		t.Errorf("%d waiting in sale, want exactly the one solved place", n)
	}
	if n := e.waiting("room-b"); n != 0 {
		t.Errorf("%d waiting in room-b, want 0", n)
	}
}

// TestProofOfWorkAfterRateLimit: the per-client limit comes first, as for
// the API: a solution over the limit is 429 rate_limited and takes no place.
func TestProofOfWorkAfterRateLimit(t *testing.T) {
	t.Parallel()
	e := newPowEnv(t, 4)
	v, err := e.q.Room(t.Context(), "sale")
	if err != nil {
		t.Fatal(err)
	}
	s := v.Settings
	s.ClientEntersPerMinute = 1
	if err := e.q.PutRoom(t.Context(), "sale", s); err != nil {
		t.Fatal(err)
	}
	enter := func(c pow.Challenge) response {
		return do(t, http.DefaultClient, "GET", e.url+"/shop", map[string]string{"Accept": "application/json", pow.Header: c.Token + ":" + pow.Solve(c)})
	}
	if res := enter(challengeOf(t, e, "/shop")); res.status != http.StatusTooManyRequests || !strings.Contains(res.body, `"position":1`) {
		t.Fatalf("first solved entry: %d %s, want waiting", res.status, res.body)
	}
	if res := enter(challengeOf(t, e, "/shop")); res.status != http.StatusTooManyRequests || !strings.Contains(res.body, "rate_limited") {
		t.Errorf("second solved entry over the limit: %d %s, want 429 rate_limited", res.status, res.body)
	}
	if n := e.waiting("sale"); n != 1 {
		t.Errorf("%d waiting, want 1", n)
	}
}

// TestWorkerScript: the worker is served by the proxy itself, as
// JavaScript that is not sniffed, revalidated by its ETag.
func TestWorkerScript(t *testing.T) {
	t.Parallel()
	e := newPowEnv(t, 8)
	res := do(t, http.DefaultClient, "GET", e.url+WorkerPath, nil)
	if res.status != http.StatusOK || res.header.Get("Content-Type") != "text/javascript; charset=utf-8" ||
		res.header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(res.body, "crypto.subtle") {
		t.Fatalf("GET %s: %d %q %q\n%.200s", WorkerPath, res.status, res.header.Get("Content-Type"), res.header.Get("X-Content-Type-Options"), res.body)
	}
	etag := res.header.Get("ETag")
	if res := do(t, http.DefaultClient, "GET", e.url+WorkerPath, map[string]string{"If-None-Match": etag}); etag == "" || res.status != http.StatusNotModified {
		t.Errorf("revalidation with ETag %q: %d, want 304", etag, res.status)
	}
	if res := do(t, http.DefaultClient, "POST", e.url+WorkerPath, nil); res.status != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %d, want 405", WorkerPath, res.status)
	}
}
