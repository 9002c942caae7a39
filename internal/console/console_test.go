package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"usher/internal/clientip"
	"usher/internal/console"
	"usher/internal/queue"
	"usher/internal/testenv"
)

// TestSignIn: the admin key signs in into an HttpOnly, SameSite=Strict,
// Secure cookie scoped to the console; a wrong key is 401 and sets none;
// the console's data routes need the cookie.
func TestSignIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{tls: true})
	json := "Content-Type: application/json"
	if r := e.do("POST", "/console/session", `{"key":"not-the-admin-key-at-all-000"}`, json); r.status != 401 || r.code() != "admin_unauthorized" || r.header.Get("Set-Cookie") != "" {
		t.Errorf("wrong key = %d %s (Set-Cookie %q), want 401 admin_unauthorized and no cookie", r.status, r.body, r.header.Get("Set-Cookie"))
	}
	if r := e.do("POST", "/console/session", `{"key":""}`, json); r.status != 401 {
		t.Errorf("empty key = %d %s, want 401", r.status, r.body)
	}
	if r := e.do("GET", "/console/session", ""); r.status != 401 {
		t.Errorf("GET /console/session without a cookie = %d, want 401", r.status)
	}
	if r := e.do("GET", "/console/api/v1/rooms", ""); r.status != 401 {
		t.Errorf("GET /console/api/v1/rooms without a cookie = %d, want 401", r.status)
	}
	if r := e.do("GET", "/console/api/v1/rooms", "", "Cookie: usher_console=1.2.3"); r.status != 401 {
		t.Errorf("a forged cookie = %d, want 401", r.status)
	}
	r := e.do("POST", "/console/session", `{"key":"`+adminKey+`"}`, json)
	if r.status != 200 {
		t.Fatalf("sign in = %d %s", r.status, r.body)
	}
	cookies := (&http.Response{Header: r.header}).Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v, want one", cookies)
	}
	c := cookies[0]
	if c.Name != console.CookieName || !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteStrictMode || c.Path != "/console/" || c.Expires.IsZero() {
		t.Errorf("cookie %+v: want %s, HttpOnly, Secure, SameSite=Strict, Path /console/, an expiry", c, console.CookieName)
	}
	cookie := "Cookie: " + c.Name + "=" + c.Value
	if r := e.do("GET", "/console/session", "", cookie); r.status != 200 {
		t.Errorf("GET /console/session with the cookie = %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/console/api/v1/rooms", "", cookie); r.status != 200 || !strings.Contains(string(r.body), `"rooms"`) {
		t.Errorf("GET /console/api/v1/rooms with the cookie = %d %s", r.status, r.body)
	}
}

// TestPages: the page and its assets are served with a strict content
// security policy, and /console redirects to /console/.
func TestPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	for path, ctype := range map[string]string{"/console/": "text/html", "/console/console.js": "text/javascript", "/console/console.css": "text/css"} {
		r := e.do("GET", path, "")
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), ctype) {
			t.Errorf("GET %s = %d %s", path, r.status, r.header.Get("Content-Type"))
		}
		if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
		body := strings.ReplaceAll(string(r.body), `"http://www.w3.org/2000/svg"`, "") // a namespace name, not a fetch
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
			t.Errorf("GET %s names an external URL", path)
		}
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/console", nil)
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 301 || res.Header.Get("Location") != "/console/" {
		t.Errorf("GET /console = %d → %q, want 301 → /console/", res.StatusCode, res.Header.Get("Location"))
	}
	if r := e.do("GET", "/console/nothing", ""); r.status != 404 || r.code() != "not_found" {
		t.Errorf("GET /console/nothing = %d %s", r.status, r.body)
	}
}

// TestCSRF: a state-changing request is refused without the session's
// token, with another session's token, from another origin or another
// site, and the room is left as it was; with the token from the same
// origin it goes through.
func TestCSRF(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.room("gig", queue.DefaultSettings())
	cookie, csrf := e.signIn()
	_, other := e.signIn()
	put := func(headers ...string) resp {
		return e.do("PUT", "/console/api/v1/rooms/gig", `{"state":"paused"}`, append([]string{cookie, "Content-Type: application/json"}, headers...)...)
	}
	for name, h := range map[string][]string{
		"no token":            nil,
		"a wrong token":       {"X-Usher-CSRF: " + csrf + "x"},
		"another session's":   {"X-Usher-CSRF: " + other},
		"another origin":      {"X-Usher-CSRF: " + csrf, "Origin: http://evil.example"},
		"another site":        {"X-Usher-CSRF: " + csrf, "Sec-Fetch-Site: cross-site"},
		"a sibling subdomain": {"X-Usher-CSRF: " + csrf, "Sec-Fetch-Site: same-site"},
	} {
		if r := put(h...); r.status != 403 || r.code() != "csrf_refused" {
			t.Errorf("PUT with %s = %d %s, want 403 csrf_refused", name, r.status, r.body)
		}
	}
	if v, err := e.q.Room(context.Background(), "gig"); err != nil || v.Settings.State != queue.Open {
		t.Fatalf("after refused PUTs the room is %v (%v), want open", v.Settings.State, err)
	}
	if r := put("X-Usher-CSRF: "+csrf, "Origin: "+e.srv.URL, "Sec-Fetch-Site: same-origin"); r.status != 200 {
		t.Fatalf("PUT with the token = %d %s", r.status, r.body)
	}
	if v, err := e.q.Room(context.Background(), "gig"); err != nil || v.Settings.State != queue.Paused {
		t.Errorf("after the PUT the room is %v (%v), want paused", v.Settings.State, err)
	}
	// Sign-out needs the token too.
	if r := e.do("DELETE", "/console/session", "", cookie); r.status != 403 {
		t.Errorf("DELETE /console/session without the token = %d, want 403", r.status)
	}
	// The sign-in has no token yet: it must be same-origin JSON.
	key := `{"key":"` + adminKey + `"}`
	for name, h := range map[string][]string{
		"a form post":    {"Content-Type: application/x-www-form-urlencoded"},
		"text/plain":     {"Content-Type: text/plain"},
		"another origin": {"Content-Type: application/json", "Origin: http://evil.example"},
		"another site":   {"Content-Type: application/json", "Sec-Fetch-Site: cross-site"},
	} {
		if r := e.do("POST", "/console/session", key, h...); r.status != 403 || r.code() != "csrf_refused" || r.header.Get("Set-Cookie") != "" {
			t.Errorf("sign-in as %s = %d %s, want 403 csrf_refused and no cookie", name, r.status, r.body)
		}
	}
}

// TestSignOut: a signed-out cookie no longer works, here.
func TestSignOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	cookie, csrf := e.signIn()
	if r := e.do("DELETE", "/console/session", "", cookie, "X-Usher-CSRF: "+csrf); r.status != 204 || !strings.Contains(r.header.Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("sign out = %d (Set-Cookie %q)", r.status, r.header.Get("Set-Cookie"))
	}
	if r := e.do("GET", "/console/session", "", cookie); r.status != 401 {
		t.Errorf("the signed-out cookie = %d, want 401", r.status)
	}
}

// TestSessionExpires: a session ends after its TTL, and so do its live
// streams.
func TestSessionExpires(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64
	e := newEnv(t, envOptions{mod: func(c *console.Config) {
		c.SessionTTL = time.Hour
		c.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	}})
	cookie, _ := e.signIn()
	if r := e.do("GET", "/console/session", "", cookie); r.status != 200 {
		t.Fatalf("fresh session = %d", r.status)
	}
	offset.Store(int64(time.Hour))
	if r := e.do("GET", "/console/session", "", cookie); r.status != 401 {
		t.Errorf("session after its TTL = %d, want 401", r.status)
	}
}

// TestSignInLimit: a client that keeps trying keys is refused (429) even
// with the right key once over its limit, and so is every address of its
// IPv6 /64; the trusted proxy's X-Forwarded-For names the client.
func TestSignInLimit(t *testing.T) {
	t.Parallel()
	trusted := clientip.Trusted{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}
	e := newEnv(t, envOptions{mod: func(c *console.Config) { c.Trusted = trusted }})
	try := func(client, key string) resp {
		return e.do("POST", "/console/session", `{"key":"`+key+`"}`, "Content-Type: application/json", "X-Forwarded-For: "+client)
	}
	for _, c := range []struct{ guesser, sameClient, other string }{
		{"203.0.113.1", "203.0.113.1", "203.0.113.2"},
		{"2001:db8:1:2::a", "2001:db8:1:2:ffff::b", "2001:db8:1:3::a"},
	} {
		for i := range console.SignInPerClient.Events {
			if r := try(c.guesser, "guess-"+strings.Repeat("x", int(i))); r.status != 401 {
				t.Fatalf("%s: guess %d = %d %s, want 401", c.guesser, i, r.status, r.body)
			}
		}
		if r := try(c.sameClient, adminKey); r.status != 429 || r.code() != "rate_limited" || r.header.Get("Retry-After") == "" {
			t.Errorf("the right key from %s after %d guesses from %s = %d %s, want 429 rate_limited with Retry-After",
				c.sameClient, console.SignInPerClient.Events, c.guesser, r.status, r.body)
		}
		if r := try(c.other, adminKey); r.status != 200 {
			t.Errorf("another client (%s) = %d %s, want 200", c.other, r.status, r.body)
		}
	}
}

// TestSignInNoLockout: strangers guessing from many addresses, each up to
// its limit, never keep an operator from another address out (there used
// to be a limit over all clients: 30 attempts a minute locked everyone
// out); each guesser is still limited.
func TestSignInNoLockout(t *testing.T) {
	t.Parallel()
	trusted := clientip.Trusted{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}
	e := newEnv(t, envOptions{mod: func(c *console.Config) { c.Trusted = trusted }})
	try := func(client, key string) resp {
		return e.do("POST", "/console/session", `{"key":"`+key+`"}`, "Content-Type: application/json", "X-Forwarded-For: "+client)
	}
	const guessers = 50
	refused := map[int]int{}
	for i := range guessers {
		client := "198.51.100." + strconv.Itoa(i+1)
		for range console.SignInPerClient.Events + 1 {
			refused[try(client, "guess").status]++
		}
	}
	if want := map[int]int{401: guessers * int(console.SignInPerClient.Events), 429: guessers}; fmt.Sprint(refused) != fmt.Sprint(want) {
		t.Errorf("%d guessers, %d attempts each: %v, want %v", guessers, console.SignInPerClient.Events+1, refused, want)
	}
	if r := try("192.0.2.77", adminKey); r.status != 200 {
		t.Errorf("the operator from 192.0.2.77 after %d strangers' guesses = %d %s, want 200", refused[401], r.status, r.body)
	}
}

// TestSignInLimitUntrustedForwardedFor: without trusted proxies the peer
// is the client: a guesser cannot get a fresh limit by rotating the
// X-Forwarded-For it sends.
func TestSignInLimitUntrustedForwardedFor(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	var got []int
	for i := range console.SignInPerClient.Events + 1 {
		r := e.do("POST", "/console/session", `{"key":"guess"}`, "Content-Type: application/json", "X-Forwarded-For: 198.51.100."+strconv.FormatInt(i+1, 10))
		got = append(got, r.status)
	}
	if last := got[len(got)-1]; last != 429 {
		t.Errorf("attempts from one peer with rotating X-Forwarded-For: %v, want the last 429", got)
	}
}

// TestForwardAllowList: only the console's routes reach the API through
// it; the others (invites, deleting a room, the visitors' routes, a
// schedule's reservations, also when an escaped / would make one segment
// of an allowed route two of another) are 404 under /console/api/.
func TestForwardAllowList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{booking: true})
	e.room("gig", queue.DefaultSettings())
	cookie, csrf := e.signIn()
	h := []string{cookie, "X-Usher-CSRF: " + csrf, "Content-Type: application/json"}
	admin := []string{"Authorization: Bearer " + adminKey, "Content-Type: application/json"}
	for _, c := range []struct{ path, body string }{
		{"/api/v1/concerts", `{"title":"Winter Tour"}`},
		{"/api/v1/concerts/1/schedules", `{"starts_at":"2026-12-24T19:00:00Z"}`},
	} {
		if r := e.do("POST", c.path, c.body, admin...); r.status != 201 {
			t.Fatalf("POST %s = %d %s", c.path, r.status, r.body)
		}
	}
	if r := e.do("GET", "/console/api/v1/schedules/1/sales", "", cookie); r.status != 200 {
		t.Errorf("GET the sales through the console = %d %s", r.status, r.body)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/console/api/v1/rooms/gig/invites", `{"count":1}`},
		{"DELETE", "/console/api/v1/rooms/gig", ""},
		{"POST", "/console/api/v1/rooms/gig/entries", `{"visitor_id":"x"}`},
		{"GET", "/console/api/v1/openapi.json", ""},
		{"GET", "/console/api/../metrics", ""},
		{"GET", "/console/api/v1/schedules/1%2Freservations", ""},
		{"GET", "/console/api/v1/rooms/gig%2Finvites", ""},
		{"PUT", "/console/api/v1/rooms/gig%2Fsignals", `{}`},
	} {
		if r := e.do(c.method, c.path, c.body, h...); r.status != 404 && r.status != 405 || strings.Contains(string(r.body), "reservations") {
			t.Errorf("%s %s = %d %s, want 404 or 405", c.method, c.path, r.status, r.body)
		}
	}
	if v, err := e.q.Room(context.Background(), "gig"); err != nil || v.Waiting != 0 {
		t.Errorf("room gig: %d waiting (%v), want 0", v.Waiting, err)
	}
	// The API's validation answers through the console.
	if r := e.do("PUT", "/console/api/v1/rooms/gig", `{"max_active":-1}`, h...); r.status != 400 || r.code() != "invalid_request" {
		t.Errorf("PUT max_active -1 = %d %s, want 400 invalid_request", r.status, r.body)
	}
	// The event timeline's route is forwarded; without it the API answers 404.
	if r := e.do("GET", "/console/api/v1/rooms/gig/events?limit=5", "", cookie); r.status != 404 && r.status != 200 {
		t.Errorf("GET events = %d %s, want 404 (no events route) or 200", r.status, r.body)
	}
}

// TestLive: the stream's tick carries the rooms' counters, and changes as
// visitors enter; streams per session are bounded.
func TestLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	s := queue.DefaultSettings()
	s.State = queue.Paused
	e.room("gig", s)
	cookie, _ := e.signIn()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ticks := e.stream(ctx, cookie)
	waiting := func() int64 {
		for tk := range ticks {
			for _, r := range tk.Rooms {
				if r.Room == "gig" {
					return r.Waiting
				}
			}
		}
		t.Fatal("stream ended")
		return 0
	}
	if n := waiting(); n != 0 {
		t.Errorf("waiting %d before anyone entered", n)
	}
	e.enter("gig", "v", 7)
	testenv.Eventually(t, time.Minute, "a tick with 7 waiting", func() bool { return waiting() == 7 })

	for i := 1; i < console.StreamsPerSession; i++ {
		e.stream(ctx, cookie)
	}
	if r := e.do("GET", "/console/live", "", cookie); r.status != 429 || r.code() != "rate_limited" {
		t.Errorf("stream %d of one session = %d %s, want 429", console.StreamsPerSession+1, r.status, r.body)
	}
	other, _ := e.signIn()
	sctx, scancel := context.WithCancel(ctx)
	e.stream(sctx, other)
	scancel()
}

// stream opens a live stream and returns its ticks; it fails the test
// unless the stream opens.
func (e *env) stream(ctx context.Context, cookie string) <-chan console.Live {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/console/live", nil)
	k, v, _ := strings.Cut(cookie, ": ")
	req.Header.Set(k, v)
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		res.Body.Close()
		e.t.Fatalf("GET /console/live = %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	out := make(chan console.Live)
	go func() {
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var l console.Live
			if json.Unmarshal([]byte(data), &l) != nil {
				continue
			}
			select {
			case out <- l:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// TestHistory: the ring fills with one sample a second.
func TestHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.room("gig", queue.DefaultSettings())
	cookie, _ := e.signIn()
	var h struct {
		Room    string
		T       []int64
		Waiting []float64
	}
	testenv.Eventually(t, time.Minute, "two samples of room gig", func() bool {
		r := e.do("GET", "/console/rooms/gig/history", "", cookie)
		if r.status != 200 {
			t.Fatalf("history = %d %s", r.status, r.body)
		}
		if err := json.Unmarshal(r.body, &h); err != nil {
			t.Fatalf("history %s: %v", r.body, err)
		}
		return len(h.T) >= 2
	})
	if h.Room != "gig" || len(h.Waiting) != len(h.T) || h.T[1] <= h.T[0] {
		t.Errorf("history %+v", h)
	}
	if r := e.do("GET", "/console/rooms/nope/history", "", cookie); r.status != 200 || !strings.Contains(string(r.body), `"t":[]`) {
		t.Errorf("history of an unknown room = %d %s, want no samples", r.status, r.body)
	}
	if r := e.do("GET", "/console/rooms/Bad!/history", "", cookie); r.status != 400 {
		t.Errorf("history of a bad room id = %d, want 400", r.status)
	}
}

// TestHistoryBusyRoomAmongIdle: once idle rooms hold every ring, a room
// someone waits in takes the ring of one of them.
func TestHistoryBusyRoomAmongIdle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	for i := range console.MaxHistoryRooms {
		e.room(fmt.Sprintf("idle-%03d", i), queue.DefaultSettings())
	}
	cookie, _ := e.signIn()
	samples := func(room string) int {
		var h struct{ T []int64 }
		r := e.do("GET", "/console/rooms/"+room+"/history", "", cookie)
		if err := json.Unmarshal(r.body, &h); r.status != 200 || err != nil {
			t.Fatalf("history of %s = %d %s", room, r.status, r.body)
		}
		return len(h.T)
	}
	last := fmt.Sprintf("idle-%03d", console.MaxHistoryRooms-1)
	testenv.Eventually(t, time.Minute, "a sample of "+last, func() bool { return samples(last) > 0 })
	s := queue.DefaultSettings()
	s.State = queue.Paused // nobody is admitted: the visitor stays waiting
	e.room("quiet-late", s)
	e.room("sale", s)
	busy := e.q.Busy("sale")
	if _, _, err := e.q.Enter(context.Background(), "sale", "v1"); err != nil {
		t.Fatal(err)
	}
	<-busy // the view shows the visitor waiting
	testenv.Eventually(t, time.Minute, "a sample of the busy room", func() bool { return samples("sale") > 0 })
	if n := samples("quiet-late"); n != 0 {
		t.Errorf("an idle room made after the rings were taken has %d samples, want none", n)
	}
	held := 0
	for i := range console.MaxHistoryRooms {
		if samples(fmt.Sprintf("idle-%03d", i)) > 0 {
			held++
		}
	}
	if held != console.MaxHistoryRooms-1 {
		t.Errorf("%d idle rooms keep a history, want %d", held, console.MaxHistoryRooms-1)
	}
}

// TestWhatIf: the arithmetic of usher plan on the operator's numbers, and
// its validation.
func TestWhatIf(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	cookie, _ := e.signIn()
	get := func(q string) (console.WhatIf, resp) {
		r := e.do("GET", "/console/whatif?"+q, "", cookie)
		var w console.WhatIf
		json.Unmarshal(r.body, &w)
		return w, r
	}
	w, r := get("waiting=100000&admit_rate=50&max_active=9000&session_seconds=180")
	if r.status != 200 || w.SustainedRate != 50 || w.PacedRate != 50 || w.LastWaitSeconds == nil || *w.LastWaitSeconds != 2000 || w.NeededMaxActive != 9000 {
		t.Fatalf("what-if = %d %s", r.status, r.body)
	}
	if !strings.Contains(w.Lines[0], "the last of the 100,000 waiting visitors waits about 33 min 20 s") {
		t.Errorf("first line %q", w.Lines[0])
	}
	// An active set too small for the rate paces the line.
	w, _ = get("waiting=1000&admit_rate=50&max_active=500&session_seconds=180")
	if w.PacedRate >= 3 || w.PacedRate <= 2.7 || !strings.Contains(strings.Join(w.Lines, " "), "The active set, not the rate, sets the pace") {
		t.Errorf("small active set: paced %v, lines %q", w.PacedRate, w.Lines)
	}
	// A slow rate reads per minute or per hour, never as 0.00/s: one slot
	// held 5 minutes sustains 0.2 visitors a minute.
	w, _ = get("waiting=5&admit_rate=50&max_active=1&session_seconds=300")
	if all := strings.Join(w.Lines, " "); strings.Contains(all, "0.00") || !strings.Contains(all, "At 0.20/min the last of the 5 waiting visitors waits about 25 min (5 ÷ 0.20/min)") {
		t.Errorf("slow rate: %q", w.Lines)
	}
	w, _ = get("waiting=10&admit_rate=0&max_active=500&session_seconds=180")
	if w.LastWaitSeconds != nil || !strings.Contains(w.Lines[0], "nobody is admitted") {
		t.Errorf("rate 0: %+v", w)
	}
	for _, q := range []string{"", "waiting=-1&admit_rate=1&max_active=1&session_seconds=60", "waiting=1&admit_rate=NaN&max_active=1&session_seconds=60",
		"waiting=1&admit_rate=1&max_active=0&session_seconds=60", "waiting=1&admit_rate=1&max_active=1&session_seconds=0"} {
		if _, r := get(q); r.status != 400 || r.code() != "invalid_request" {
			t.Errorf("what-if %q = %d %s, want 400", q, r.status, r.body)
		}
	}
}

// TestLiveETAError: visitors who waited and were found admitted by their
// polls give the room an ETA error in the tick (this instance's
// usher_eta_error_ratio over the last minute).
func TestLiveETAError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	s := queue.DefaultSettings()
	s.AdmitRate, s.MaxActive = 2, 100
	e.room("gig", s)
	testenv.Eventually(t, time.Minute, "the view of gig", func() bool { _, ok := e.q.View("gig"); return ok })
	var tickets []string
	for i := range 4 {
		r := e.do("POST", "/api/v1/rooms/gig/entries", `{"visitor_id":"eta-`+strconv.Itoa(i)+`"}`, "Authorization: Bearer "+adminKey, "Content-Type: application/json")
		var en struct{ Ticket, State string }
		if err := json.Unmarshal(r.body, &en); err != nil || en.Ticket == "" {
			t.Fatalf("enter = %d %s", r.status, r.body)
		}
		if en.State == "waiting" {
			tickets = append(tickets, en.Ticket)
		}
	}
	if len(tickets) == 0 {
		t.Fatal("nobody waited")
	}
	for _, tk := range tickets {
		testenv.Eventually(t, time.Minute, "a poll that finds the visitor admitted", func() bool {
			r := e.do("GET", "/api/v1/rooms/gig/entries/me", "", "Authorization: Bearer "+tk)
			return strings.Contains(string(r.body), `"state":"admitted"`)
		})
	}
	cookie, _ := e.signIn()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ticks := e.stream(ctx, cookie)
	testenv.Eventually(t, time.Minute, "a tick with gig's ETA error", func() bool {
		for _, r := range (<-ticks).Rooms {
			if r.Room == "gig" && r.ETAError != nil {
				return *r.ETAError > -10 && *r.ETAError < 1
			}
		}
		return false
	})
}

// TestIdleRoomRates: an open room nobody waits in shows what happened,
// as the room API does: nothing admitted, nobody leaving, no abandonment,
// in the live tick and in the chart's history alike (not the ETA's
// estimate of the rate, which keeps its last value).
func TestIdleRoomRates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	s := queue.DefaultSettings()
	s.AdmitRate = 5
	e.room("idle", s)
	cookie, _ := e.signIn()
	var h struct {
		T        []int64
		Measured []float64 `json:"admit_rate_measured"`
		Leave    []float64 `json:"leave_rate"`
	}
	testenv.Eventually(t, time.Minute, "two samples of room idle", func() bool {
		r := e.do("GET", "/console/rooms/idle/history", "", cookie)
		if err := json.Unmarshal(r.body, &h); r.status != 200 || err != nil {
			t.Fatalf("history = %d %s", r.status, r.body)
		}
		return len(h.T) >= 2
	})
	for i := range h.T {
		if h.Measured[i] != 0 || h.Leave[i] != 0 {
			t.Errorf("history of an idle room at %d: measured %v/s, leaving %v/s, want 0 and 0", h.T[i], h.Measured[i], h.Leave[i])
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, r := range (<-e.stream(ctx, cookie)).Rooms {
		if r.Room == "idle" && (r.AdmitRateMeasured != 0 || r.LeaveRate != 0 || r.Abandonment != nil) {
			t.Errorf("live tick of an idle room: measured %v/s, leaving %v/s, abandonment %v; want 0, 0, none",
				r.AdmitRateMeasured, r.LeaveRate, r.Abandonment)
		}
	}
}
