package gateway

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"usher/internal/canon"
	"usher/internal/clientip"
	"usher/internal/flood"
	"usher/internal/limit/memlimit"
	"usher/internal/pow"
	"usher/internal/queue"
	"usher/internal/token"
)

// overrideHeaders are the request headers some origins route by
// (wire.Headers drops them).
var overrideHeaders = []string{
	"X-Original-URL", "X-Rewrite-URL", "X-Original-URI", "X-Override-URL",
	"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override",
}

// recorder is an origin that records the request target of every request it
// receives, and the override headers it was sent.
type recorder struct {
	mu   sync.Mutex
	seen []string
}

func (o *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.seen = append(o.seen, r.RequestURI)
	for _, h := range overrideHeaders {
		if v := r.Header.Get(h); v != "" {
			o.seen = append(o.seen, h+": "+v)
		}
	}
	o.mu.Unlock()
	fmt.Fprintf(w, "origin %s", r.URL.Path)
}

func (o *recorder) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.seen
	o.seen = nil
	return s
}

// raw sends one request line and headers over TCP and returns the response.
func raw(t *testing.T, base, line string, headers ...string) *http.Response {
	t.Helper()
	u, _ := url.Parse(base)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(20 * time.Second)) // a failure ends the test, never hangs it
	fmt.Fprintf(conn, "%s\r\nHost: %s\r\n", line, u.Host)
	for _, h := range headers {
		fmt.Fprintf(conn, "%s\r\n", h)
	}
	fmt.Fprintf(conn, "Connection: close\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	res.Body.Close()
	return res
}

// TestGateCannotBeWalkedAround sends, without a pass (or with another
// room's), every spelling of a gated path that probing found or that the
// OWASP path-traversal classes list, as raw request lines, and asserts that
// the origin never received a request for a gated path (or the other
// room's): everything it received is a canonical path whose rule is open
// (or the pass's own room).
func TestGateCannotBeWalkedAround(t *testing.T) {
	o := &recorder{}
	origin := newOrigin(t, o.ServeHTTP)
	rules := Rules{
		DefaultRoom: "sale",
		Gate:        []string{"/shop", "/concert-a/", "/concert-b/"},
		Open:        []string{"/static/"},
		Routes:      []Route{{Prefix: "/concert-a/", Room: "room-a"}, {Prefix: "/concert-b/", Room: "room-b"}},
	}
	e := newEnv(t, origin, rules)
	passA := e.admit("room-a", "va", time.Time{})

	// Every received target must be canonical and allowed for the holder.
	allowed := func(t *testing.T, target, room string) {
		t.Helper()
		if strings.Contains(target, ": ") {
			t.Errorf("origin received an override header: %q", target)
			return
		}
		p, changed, err := canon.Target(target)
		if err != nil || changed {
			t.Errorf("origin received a non-canonical target %q", target)
			return
		}
		r, gated, err := rules.Resolve(p)
		if err != nil || (gated && r != room) {
			t.Errorf("origin received %q (room %q, gated %v) for a visitor of room %q", target, r, gated, room)
		}
	}

	attacks := []struct {
		line    string
		headers []string
		room    string // the room of the pass sent, "" for none
	}{
		{line: "GET /static/../shop/index.html HTTP/1.1"},
		{line: "GET /static/%2e%2e/shop/index.html HTTP/1.1"},
		{line: "GET /static/%2E%2E/shop/index.html HTTP/1.1"},
		{line: "GET /static/.%2e/shop/index.html HTTP/1.1"},
		{line: "GET /static/..%2Fshop/index.html HTTP/1.1"},
		{line: "GET /static/..%2fshop/index.html HTTP/1.1"},
		{line: "GET /static/..%5Cshop/index.html HTTP/1.1"},
		{line: "GET /static/..\\shop/index.html HTTP/1.1"},
		{line: "GET /static/%252e%252e/shop/index.html HTTP/1.1"},
		{line: "GET /static/%c0%ae%c0%ae/shop/index.html HTTP/1.1"},
		{line: "GET /static/%u002e%u002e/shop/index.html HTTP/1.1"},
		{line: "GET /static/..;/shop/index.html HTTP/1.1"},
		{line: "GET /static/%2e%2e%3b/shop/index.html HTTP/1.1"},
		{line: "GET //shop/index.html HTTP/1.1"},
		{line: "GET /x/../shop/index.html HTTP/1.1"},
		{line: "GET /./shop/index.html HTTP/1.1"},
		{line: "GET /SHOP/index.html HTTP/1.1"},
		{line: "GET /Shop HTTP/1.1"},
		{line: "GET /shop;x/index.html HTTP/1.1"},
		{line: "GET /shop./index.html HTTP/1.1"},
		{line: "GET /shop%20/index.html HTTP/1.1"},
		{line: "GET /shop%09/index.html HTTP/1.1"},
		{line: "GET /shop%00/index.html HTTP/1.1"},
		{line: "GET /shop::$DATA HTTP/1.1"},
		{line: "GET /%73hop/index.html HTTP/1.1"}, // an escaped letter is the same path: gated
		{line: "GET http://x HTTP/1.1"},
		{line: "GET http://x/shop/index.html HTTP/1.1"},
		{line: "GET http://x/static/../shop/ HTTP/1.1"},
		{line: "CONNECT x:443 HTTP/1.1"},
		{line: "TRACE /shop HTTP/1.1"},
		{line: "OPTIONS * HTTP/1.1"},
		{line: "GET /static/app.css HTTP/1.1", headers: []string{"X-Original-URL: /shop/index.html"}},
		{line: "GET /static/app.css HTTP/1.1", headers: []string{"X-Rewrite-URL: /shop/index.html"}},
		{line: "GET /concert-a/../concert-b/seats HTTP/1.1", room: "room-a"},
		{line: "GET /concert-a/%2e%2e/concert-b/seats HTTP/1.1", room: "room-a"},
		{line: "GET /concert-a/..%2Fconcert-b/seats HTTP/1.1", room: "room-a"},
		{line: "GET /Concert-B/seats HTTP/1.1", room: "room-a"},
		{line: "GET //concert-b/seats HTTP/1.1", room: "room-a"},
	}
	for _, a := range attacks {
		headers := a.headers
		if a.room == "room-a" {
			headers = append(headers, "Authorization: Bearer "+passA)
		}
		res := raw(t, e.url, a.line, headers...)
		if loc := res.Header.Get("Location"); loc != "" && (strings.HasPrefix(loc, "//") || strings.Contains(loc, "://")) {
			t.Errorf("%s: redirected off-site to %q", a.line, loc)
		}
		for _, target := range o.take() {
			allowed(t, target, a.room)
		}
		if t.Failed() {
			t.Logf("after %q: %d", a.line, res.StatusCode)
		}
	}

	// The honest requests still work.
	for _, tc := range []struct {
		line, auth string
		want       int
	}{
		{"GET /static/app.css HTTP/1.1", "", http.StatusOK},
		{"GET /concert-a/seats HTTP/1.1", "Authorization: Bearer " + passA, http.StatusOK},
		{"GET //static/app.css HTTP/1.1", "", http.StatusPermanentRedirect},
	} {
		var h []string
		if tc.auth != "" {
			h = append(h, tc.auth)
		}
		if res := raw(t, e.url, tc.line, h...); res.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.line, res.StatusCode, tc.want)
		}
		o.take()
	}
}

// TestRedirectsStayOnSite: a non-canonical spelling is redirected to the
// canonical path on the same site, and the waiting page's links and the
// admitted visitor's redirect never point off-site.
func TestRedirectsStayOnSite(t *testing.T) {
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	for _, target := range []string{"//evil.example/phish", "///evil.example/phish", "/\\evil.example/phish", "/./\\evil.example", "//evil.example/%2F..", "/.//evil.example"} {
		res := raw(t, e.url, "GET "+target+" HTTP/1.1")
		loc := res.Header.Get("Location")
		if strings.HasPrefix(loc, "//") || strings.Contains(loc, "://") || strings.HasPrefix(loc, "/\\") {
			t.Errorf("GET %s: Location %q leaves the site", target, loc)
		}
		if res.StatusCode != http.StatusPermanentRedirect && res.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want a redirect to the canonical path or 400", target, res.StatusCode)
		}
	}
}

// TestGatedAnswersNotShared: a gated answer is marked private and varies by
// cookie, unless the origin chose its own caching; an open one is left alone;
// a client's X-Forwarded-Host never reaches the origin.
func TestGatedAnswersNotShared(t *testing.T) {
	origin := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/shop/own" {
			w.Header().Set("Cache-Control", "no-store")
		}
		w.Header().Set("Echo-X-Forwarded-Host", r.Header.Get("X-Forwarded-Host"))
		fmt.Fprint(w, "ok")
	})
	e := newEnv(t, origin, Rules{Gate: []string{"/shop"}})
	pass := e.admit("sale", "v1", time.Time{})
	auth := map[string]string{"Authorization": "Bearer " + pass, "X-Forwarded-Host": "evil.example"}
	res := do(t, http.DefaultClient, "GET", e.url+"/shop/item", auth)
	if cc := res.header.Get("Cache-Control"); res.status != 200 || cc != "private" {
		t.Errorf("gated answer: %d, Cache-Control %q, want 200 private", res.status, cc)
	}
	if v := strings.Join(res.header.Values("Vary"), ","); !strings.Contains(v, "Cookie") {
		t.Errorf("gated answer: Vary %q lacks Cookie", v)
	}
	if h := res.header.Get("Echo-X-Forwarded-Host"); h == "evil.example" {
		t.Errorf("the client's X-Forwarded-Host reached the origin")
	}
	if res := do(t, http.DefaultClient, "GET", e.url+"/shop/own", auth); res.header.Get("Cache-Control") != "no-store" {
		t.Errorf("origin's own Cache-Control replaced: %q", res.header.Get("Cache-Control"))
	}
	if res := do(t, http.DefaultClient, "GET", e.url+"/about", nil); res.header.Get("Cache-Control") != "" {
		t.Errorf("open answer got Cache-Control %q", res.header.Get("Cache-Control"))
	}
}

// TestOnlyPageViewsEnter: HEAD, OPTIONS and other methods without a place
// never take one; cookie-less GETs take at most the room's per-client limit.
func TestOnlyPageViewsEnter(t *testing.T) {
	var guard *flood.Guard
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{}, func(c *Config) {
		limits := memlimit.New()
		guard = flood.New(limits, pow.New(c.Keys, limits, time.Now), clientip.Trusted{}, time.Now)
		c.Flood = guard
	})
	s := queue.DefaultSettings()
	s.MaxActive, s.AdmitRate, s.ClientEntersPerMinute = 1, queue.MinAdmitRate, 3
	if err := e.q.PutRoom(t.Context(), "sale", s); err != nil {
		t.Fatal(err)
	}
	places := func() int64 {
		v, err := e.q.Room(t.Context(), "sale")
		if err != nil {
			t.Fatal(err)
		}
		return v.Waiting + v.Active
	}
	for _, m := range []string{"HEAD", "OPTIONS", "PUT", "DELETE", "PATCH"} {
		res := do(t, http.DefaultClient, m, e.url+"/shop", map[string]string{"Accept": "application/json"})
		if res.status != http.StatusMethodNotAllowed {
			t.Errorf("%s without a place: %d, want 405", m, res.status)
		}
	}
	if n := places(); n != 0 {
		t.Fatalf("%d places after HEAD/OPTIONS/PUT/DELETE/PATCH, want 0", n)
	}
	for i := range 5 {
		res := do(t, http.DefaultClient, "GET", e.url+"/shop", map[string]string{"Accept": "application/json"})
		if i >= 3 && (res.status != http.StatusTooManyRequests || !strings.Contains(res.body, "rate_limited") || res.header.Get("Retry-After") == "") {
			t.Errorf("cookie-less GET %d over the limit: %d %s", i+1, res.status, res.body)
		}
	}
	if n := places(); n != 3 {
		t.Fatalf("%d places after 5 cookie-less GETs, want the limit 3", n)
	}
}

// TestSlowBodyCut: a client that sends a body slower than BodyTimeout loses
// the connection instead of holding it; the test's own deadline only bounds
// a failure.
func TestSlowBodyCut(t *testing.T) {
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{Open: []string{"/upload"}}, func(c *Config) {
		c.BodyTimeout = 100 * time.Millisecond
	})
	u, _ := url.Parse(e.url)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(conn, "POST /upload HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n\r\nonly a little", u.Host)
	// Never send the rest: the proxy must answer or close, not wait.
	buf := make([]byte, 4096)
	for {
		if _, err := conn.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the proxy still held the connection with a body outstanding")
			}
			return // closed: the connection was cut
		}
	}
}

// TestPresaleThroughProxy: a room with require_invite never mints an
// anonymous visitor behind the proxy; ?usher_invite= enters as the invite
// (one code, one place, from any browser) and the visitor is sent back
// without the code in the URL.
func TestPresaleThroughProxy(t *testing.T) {
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	s := queue.DefaultSettings()
	s.MaxActive, s.AdmitRate, s.RequireInvite = 1, queue.MinAdmitRate, true
	if err := e.q.PutRoom(t.Context(), "sale", s); err != nil {
		t.Fatal(err)
	}
	e.admit("sale", "holder", time.Time{}) // takes the one slot
	exp := time.Now().Add(time.Hour)
	code := e.keys.SignInvite(token.Invite{Room: "sale", ID: token.NewInviteID(), ExpiresAt: exp})
	json := map[string]string{"Accept": "application/json"}
	if res := do(t, http.DefaultClient, "GET", e.url+"/shop", json); res.status != http.StatusForbidden || !strings.Contains(res.body, "invite_required") {
		t.Errorf("no invite: %d %s, want 403 invite_required", res.status, res.body)
	}
	if res := do(t, http.DefaultClient, "GET", e.url+"/shop?usher_identity=any.signed.assertion", json); res.status != http.StatusForbidden || !strings.Contains(res.body, "invite_required") {
		t.Errorf("an identity without an invite: %d %s, want 403 invite_required", res.status, res.body)
	}
	if res := do(t, http.DefaultClient, "GET", e.url+"/shop?usher_invite=forged", json); res.status != http.StatusUnauthorized {
		t.Errorf("forged invite: %d %s, want 401", res.status, res.body)
	}
	a := do(t, http.DefaultClient, "GET", e.url+"/shop?usher_invite="+url.QueryEscape(code), json)
	b := do(t, http.DefaultClient, "GET", e.url+"/shop?x=1&usher_invite="+url.QueryEscape(code), json)
	if a.status != http.StatusTooManyRequests || b.status != http.StatusTooManyRequests || !strings.Contains(a.body, `"position":1`) || !strings.Contains(b.body, `"position":1`) {
		t.Errorf("one invite from two browsers: %d %s / %d %s, want both waiting at position 1", a.status, a.body, b.status, b.body)
	}
	v, err := e.q.Room(t.Context(), "sale")
	if err != nil || v.Waiting != 1 {
		t.Errorf("waiting %d, %v; want the invite's one place", v.Waiting, err)
	}
	if res := do(t, http.DefaultClient, "GET", e.url+"/shop", nil); res.status != http.StatusForbidden || strings.Contains(res.body, "refresh") || res.header.Get("Retry-After") != "" {
		t.Errorf("browser without an invite: %d, Retry-After %q, want a plain 403 page that does not reload:\n%.300s", res.status, res.header.Get("Retry-After"), res.body)
	}
	page := do(t, http.DefaultClient, "GET", e.url+"/shop?x=1&usher_invite="+url.QueryEscape(code), nil)
	if strings.Contains(page.body, "usher_invite") || !strings.Contains(page.body, "/shop?x=1") {
		t.Errorf("the waiting page keeps the invite in its URL, or lost the rest:\n%.300s", page.body)
	}
}
