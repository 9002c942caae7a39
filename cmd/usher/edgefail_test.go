package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"usher/internal/edgeconf"
	"usher/internal/testenv"
)

// startAuth runs `usher auth args…` (through run, no environment) until
// stop or the end of the test, and returns once /_usher/healthz answers.
func startAuth(t *testing.T, args ...string) *instance {
	t.Helper()
	return startStoppable(t, "auth", "/_usher/healthz", args...)
}

// killable puts a TCP proxy in front of in: the address the edge is given
// for it, and a kill that cuts every connection, refuses new ones and
// stops the instance, as a killed process would look to the edge.
func killable(t *testing.T, in *instance) (addr string, kill func()) {
	p := testenv.NewProxy(t, strings.TrimPrefix(in.base, "http://"))
	return "http://" + p.Addr(), func() { p.Kill(); in.stop() }
}

// printedEdge writes `usher auth --print edge args…` (with a listen
// address and edge directory of its own) and runs it, returning its URL
// and the edge directory.
func printedEdge(t *testing.T, edge string, args ...string) (base, dir string) {
	t.Helper()
	if edge == "nginx" {
		testenv.NginxBin(t)
	} else {
		testenv.CaddyBin(t)
	}
	dir = t.TempDir()
	var conf strings.Builder
	if err := run(context.Background(), append([]string{"auth", "--print", edge, "--listen", testenv.ClosedAddr(t),
		"--edge-dir", dir, "--insecure-cookies"}, args...), func(string) string { return "" }, &conf, io.Discard); err != nil {
		t.Fatalf("usher auth --print %s: %v", edge, err)
	}
	if edge == "nginx" {
		return testenv.Nginx(t, conf.String()), dir
	}
	return testenv.Caddy(t, conf.String()), dir
}

// reply is one request's outcome as its client saw it.
type reply struct {
	status int
	header http.Header
	body   string
	err    error
}

func ask(c *http.Client, method, url string, header ...string) reply {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return reply{err: err}
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return reply{status: res.StatusCode, header: res.Header, body: string(b), err: err}
}

// walkArounds are spellings that reach a gated path through an open
// prefix in some origin's reading (testAuthBehind sends them too), and
// targets that must never skip usher.
var walkArounds = []string{"/%73hop", "/SHOP", "/%C5%BFhop/x", "/%EF%BD%93hop/x", "/static/../shop", "/static/%2e%2e/shop",
	"/static%2f..%2fshop", "/static/..%2fshop", "/static/%2e%2e%2fshop", "//shop", "/static/./../shop", "/shop;/x",
	"/static/..;/shop", "/STATIC/x", "/static//x", "/static/x./", "/static/PRIVAT~1/x", "/static/a::$DATA",
	"/static\\..\\shop", "/static/x?usher_invite=abc", "/static/x?u%73her_lane=abc", "http://127.0.0.1/shop"}

// TestEdgeUsherDown stops the only usher behind nginx and Caddy as
// `usher auth --print` configures them, closed (the default) and open
// (--edge-fail open): open paths are still served, the walk-around
// spellings of a gated path are not; a gated path gets the edge's own
// page or usher's error JSON (closed) or the origin (open), and a
// credential in the query never reaches the origin.
func TestEdgeUsherDown(t *testing.T) {
	t.Parallel()
	for _, edge := range []string{"nginx", "caddy"} {
		for _, mode := range []string{"closed", "open"} {
			t.Run(edge+"/"+mode, func(t *testing.T) {
				t.Parallel()
				testEdgeUsherDown(t, edge, mode)
			})
		}
	}
}

func testEdgeUsherDown(t *testing.T, edge, mode string) {
	origin := newEdgeOrigin(t)
	in := startAuth(t, "--addr", "127.0.0.1:0", "--data-dir", testenv.DataDir(t), "--admin-key", proxyAdminKey,
		"--insecure-cookies", "--open", "/static/")
	addr, kill := killable(t, in)
	args := []string{"--origin", origin.URL, "--usher", addr, "--open", "/static/"}
	if mode == "open" {
		args = append(args, "--edge-fail", "open")
	}
	base, _ := printedEdge(t, edge, args...)
	c := &http.Client{Timeout: 30 * time.Second}
	if a := ask(newBrowser(t), "GET", base+"/shop"); a.err != nil || a.status == http.StatusServiceUnavailable {
		t.Fatalf("GET /shop with usher up: %d %v %q", a.status, a.err, a.body)
	}
	kill()

	n := origin.count()
	for _, tc := range []struct{ method, target string }{
		{"GET", "/static/app.js"}, {"GET", "/static/css/site.css?v=3"}, {"HEAD", "/static/app.js"}, {"POST", "/static/form"},
		{"GET", "/static/a/b/c.png?w=1&h=2"}, {"OPTIONS", "/static/font.woff2"},
	} {
		a := ask(c, tc.method, base+tc.target)
		want := "origin " + tc.target
		if tc.method == "HEAD" {
			want = ""
		}
		if a.err != nil || a.status != 200 || a.body != want {
			t.Errorf("%s %s with usher down: %d %v %q, want the origin's 200", tc.method, tc.target, a.status, a.err, a.body)
		}
	}
	for _, target := range walkArounds {
		st, h, _ := rawEdge(t, base, "GET "+target+" HTTP/1.1", "Host: 127.0.0.1", "Connection: close")
		if mode == "closed" && (st != http.StatusServiceUnavailable || h.Get("Retry-After") == "") {
			t.Errorf("GET %s with usher down, fail closed: %d (Retry-After %q), want the edge's 503", target, st, h.Get("Retry-After"))
		}
	}
	for _, r := range origin.since(n) {
		target := r.RequestURI
		clean := strings.HasPrefix(target, "/static/") && !strings.ContainsAny(target, "%;\\~:") &&
			!strings.Contains(target, "..") && !strings.Contains(target, "//") && !strings.Contains(target, "./")
		if strings.Contains(strings.ToLower(target), "usher") || mode == "closed" && !clean {
			t.Errorf("fail %s, usher down: the origin got %s %s", mode, r.Method, target)
		}
	}

	n = origin.count()
	page := ask(c, "GET", base+"/shop/item", "Accept", "text/html,application/xhtml+xml")
	js := ask(c, "POST", base+"/shop/cart", "Accept", "application/json")
	api := ask(c, "GET", base+"/_usher/api/v1/rooms/sale/status")
	cred := ask(c, "GET", base+"/shop/x?usher_invite=abc")
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if api.status != http.StatusServiceUnavailable || json.Unmarshal([]byte(api.body), &body) != nil || body.Error.Code != "unavailable" {
		t.Errorf("usher's API with usher down: %d %q, want 503 with usher's error JSON", api.status, api.body)
	}
	if cred.status != http.StatusServiceUnavailable {
		t.Errorf("gated path with a credential in the query, usher down: %d %q, want the edge's 503", cred.status, cred.body)
	}
	switch mode {
	case "closed":
		if page.status != http.StatusServiceUnavailable || !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") ||
			!strings.Contains(page.body, "High demand") || page.header.Get("Retry-After") == "" || page.header.Get("Cache-Control") != "no-store" {
			t.Errorf("browser on a gated path, usher down: %d %v %q, want the edge's 503 page", page.status, page.header, page.body)
		}
		body.Error.Code = ""
		if js.status != http.StatusServiceUnavailable || js.header.Get("Content-Type") != "application/json" ||
			js.header.Get("Retry-After") == "" || json.Unmarshal([]byte(js.body), &body) != nil || body.Error.Code != "unavailable" {
			t.Errorf("JSON client on a gated path, usher down: %d %v %q, want 503 with usher's error JSON", js.status, js.header, js.body)
		}
		if got := origin.since(n); len(got) > 0 {
			t.Errorf("fail closed, usher down: the origin got %s %s", got[0].Method, got[0].RequestURI)
		}
	case "open":
		if page.status != 200 || page.body != "origin /shop/item" || js.status != 200 || js.body != "origin /shop/cart" {
			t.Errorf("gated paths, usher down, fail open: %d %q and %d %q, want the origin", page.status, page.body, js.status, js.body)
		}
		for _, r := range origin.since(n) {
			if r.Header.Get("Usher-Visitor") != "" || strings.Contains(r.RequestURI, "usher") {
				t.Errorf("fail open: the origin got %s %s with Usher-Visitor %q", r.Method, r.RequestURI, r.Header.Get("Usher-Visitor"))
			}
		}
	}
}

// TestEdgeKillSwitch takes usher out of the path behind nginx and Caddy
// by creating edgeconf.SwitchFile in the edge directory, and puts it back
// by removing it: in between, a gated path of a paused room reaches the
// origin with no question to usher (but a credential in the query does
// not), and usher's own routes still go to usher.
func TestEdgeKillSwitch(t *testing.T) {
	t.Parallel()
	for _, edge := range []string{"nginx", "caddy"} {
		t.Run(edge, func(t *testing.T) {
			t.Parallel()
			origin := newEdgeOrigin(t)
			in := startAuth(t, "--addr", "127.0.0.1:0", "--data-dir", testenv.DataDir(t), "--admin-key", proxyAdminKey,
				"--insecure-cookies", "--open", "/static/")
			tap, asked := tapUsher(t, in.base)
			base, dir := printedEdge(t, edge, "--origin", origin.URL, "--usher", tap, "--open", "/static/")
			aliasAdmin(t, base, in.base)
			c := client{t, base}
			if st, _, body := c.admin().do("PUT", "/api/v1/rooms/sale", proxyAdminKey, `{"state":"paused"}`); st != 200 && st != 201 {
				t.Fatalf("pausing the room: %d %v", st, body)
			}
			b := newBrowser(t)
			gated := func(path string) int {
				st, _ := get(t, b, base+path)
				return st
			}
			if st := gated("/shop/before"); st != http.StatusTooManyRequests {
				t.Fatalf("gated path of a paused room: %d, want 429", st)
			}

			sw := filepath.Join(dir, edgeconf.SwitchFile)
			if err := os.WriteFile(sw, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			n := origin.count()
			if st, body := get(t, b, base+"/shop/off"); st != 200 || body != "origin /shop/off" {
				t.Errorf("gated path, kill switch on: %d %q, want the origin", st, body)
			}
			if _, ok := asked.find("/shop/off"); ok {
				t.Error("kill switch on: usher was asked about /shop/off")
			}
			if st, _ := get(t, b, base+"/shop/x?usher_invite=abc"); st != http.StatusServiceUnavailable {
				t.Errorf("a credential in the query, kill switch on: %d, want the edge's 503", st)
			}
			for _, r := range origin.since(n) {
				if r.RequestURI != "/shop/off" || r.Header.Get("Usher-Visitor") != "" {
					t.Errorf("kill switch on: the origin got %s with Usher-Visitor %q", r.RequestURI, r.Header.Get("Usher-Visitor"))
				}
			}
			if st, _, _ := c.admin().do("GET", "/api/v1/rooms/sale", proxyAdminKey, ""); st != 200 {
				t.Errorf("usher's API, kill switch on: %d, want usher's 200", st)
			}

			if err := os.Remove(sw); err != nil {
				t.Fatal(err)
			}
			if st := gated("/shop/after"); st != http.StatusTooManyRequests {
				t.Errorf("gated path, kill switch off again: %d, want usher's 429", st)
			}
			if _, ok := asked.find("/shop/after"); !ok {
				t.Error("kill switch off again: usher was not asked about /shop/after")
			}
		})
	}
}

// TestEdgeFailover runs two usher auth instances on one Redis behind
// nginx and Caddy, as `usher auth --print` configures them with both,
// and kills one while a bounded load runs: open paths, visitors with a
// pass and visitors waiting in line, each from its own client. A failure
// is what a client sees: a connection error, a 5xx, or another reply
// than its own (the origin for open paths and passes; its place, never
// further back, for the waiting). None may fail.
func TestEdgeFailover(t *testing.T) {
	t.Parallel()
	for _, edge := range []string{"nginx", "caddy"} {
		t.Run(edge, func(t *testing.T) {
			t.Parallel()
			testEdgeFailover(t, edge)
		})
	}
}

func testEdgeFailover(t *testing.T, edge string) {
	redisURL := testenv.URL(t, "USHER_TEST_REDIS")
	prefix := testenv.RedisPrefix(t, testenv.Redis(t))
	keys := t.TempDir()
	args := func() []string {
		return []string{"--addr", "127.0.0.1:0", "--store", redisURL, "--redis-prefix", prefix, "--keys-dir", keys,
			"--admin-key", proxyAdminKey, "--data-dir", testenv.DataDir(t), "--insecure-cookies", "--open", "/static/",
			"--public-host", "localhost"}
	}
	a := startAuth(t, args()...) // first: it writes the keys
	b := startAuth(t, args()...)
	addrA, _ := killable(t, a)
	addrB, killB := killable(t, b)
	origin := newEdgeOrigin(t)
	// A public host, so that the health checks must name it; the edge
	// listens on 127.0.0.1, which clients reach as localhost.
	base, _ := printedEdge(t, edge, "--origin", origin.URL, "--usher", addrA, "--usher", addrB, "--open", "/static/",
		"--public-host", "localhost")
	base = strings.Replace(base, "127.0.0.1", "localhost", 1)

	const holders, waiters = 3, 3
	aliasAdmin(t, base, a.base)
	c := client{t, base}
	if st, _, body := c.admin().do("PUT", "/api/v1/rooms/sale", proxyAdminKey, fmt.Sprintf(`{"state":"open","max_active":%d,`+
		`"admit_rate":100,"interval_ms":50,"active_ttl_seconds":600,"claim_window_seconds":600,"presence_timeout_seconds":0}`, holders)); st != 200 && st != 201 {
		t.Fatalf("room through the edge: %d %v", st, body)
	}
	var pass []*http.Client
	for i := range holders {
		h, _ := admittedBrowser(t, base, fmt.Sprintf("/shop/enter-%d", i))
		pass = append(pass, h)
	}
	type place struct {
		State    string `json:"state"`
		Position int    `json:"position"`
	}
	poll := func(w *http.Client) (reply, place) {
		a := ask(w, "GET", base+"/shop/line", "Accept", "application/json")
		var p place
		json.Unmarshal([]byte(a.body), &p)
		return a, p
	}
	var wait []*http.Client
	var first []int
	for range waiters {
		w := newBrowser(t)
		w.Timeout = 30 * time.Second
		if a, p := poll(w); a.status != http.StatusTooManyRequests || p.State != "waiting" {
			t.Fatalf("a visitor beyond max_active: %d %q, want 429 waiting", a.status, a.body)
		} else {
			first = append(first, p.Position)
		}
		wait = append(wait, w)
	}

	// The load: workers × rounds, each round one request of each kind;
	// usher B is killed once a third of the rounds are done.
	const workers, rounds = 6, 40
	var mu sync.Mutex
	failed := map[string][]string{}
	fail := func(kind, what string) {
		mu.Lock()
		defer mu.Unlock()
		failed[kind] = append(failed[kind], what)
	}
	var done, afterKill atomic.Int64
	var killed atomic.Bool
	open := &http.Client{Timeout: 30 * time.Second}
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i := range rounds {
				target := fmt.Sprintf("/static/w%d/%d.js", g, i)
				if r := ask(open, "GET", base+target); r.err != nil || r.status != 200 || r.body != "origin "+target {
					fail("open", fmt.Sprintf("GET %s: %d %v %q", target, r.status, r.err, r.body))
				}
				target = fmt.Sprintf("/shop/w%d/%d", g, i)
				if r := ask(pass[(g+i)%holders], "GET", base+target); r.err != nil || r.status != 200 || r.body != "origin "+target {
					fail("pass", fmt.Sprintf("GET %s: %d %v %q", target, r.status, r.err, r.body))
				}
				v := (g + i) % waiters
				if r, p := poll(wait[v]); r.err != nil || r.status != http.StatusTooManyRequests || p.State != "waiting" || p.Position > first[v] {
					fail("waiting", fmt.Sprintf("visitor %d (first at %d): %d %v %q", v, first[v], r.status, r.err, r.body))
				}
				if n := done.Add(1); n == workers*rounds/3 {
					killB()
					killed.Store(true)
				} else if killed.Load() {
					afterKill.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if !killed.Load() || afterKill.Load() < workers*rounds/3 {
		t.Fatalf("usher B killed %v with %d rounds after it, want a kill a third of the way", killed.Load(), afterKill.Load())
	}
	for _, kind := range []string{"open", "pass", "waiting"} {
		if f := failed[kind]; len(f) > 0 {
			t.Errorf("%s: %d of %d requests failed after one usher was killed; the first: %s", kind, len(f), workers*rounds, f[0])
		}
	}
}
