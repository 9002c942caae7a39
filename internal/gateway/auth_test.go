package gateway

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/testenv"
	"usher/internal/token"
	"usher/internal/wire"
)

type authEnv struct {
	t    *testing.T
	q    *queue.Queue
	keys *token.Keyring
	a    *Auth
	url  string
}

func newAuthEnv(t *testing.T, rules Rules) *authEnv {
	t.Helper()
	keys, err := token.LoadDir(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	q := queue.New(memqueue.New(), queue.Options{})
	if rules.DefaultRoom == "" {
		rules.DefaultRoom = "sale"
	}
	for _, room := range rules.Rooms() {
		s := queue.DefaultSettings()
		s.MaxActive = 1
		if err := q.PutRoom(context.Background(), room, s); err != nil {
			t.Fatal(err)
		}
	}
	a, err := NewAuth(Config{Queue: q, Keys: keys, Rules: rules, Registry: prometheus.NewRegistry(), InsecureCookies: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return &authEnv{t: t, q: q, keys: keys, a: a, url: srv.URL}
}

// ask sends a check to path about the original request method target,
// as a front proxy of the given flavour names it.
func (e *authEnv) ask(path, flavour, method, target string, h map[string]string) (*http.Response, string) {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.url+path, nil)
	if flavour == "envoy" { // the original request itself, under the prefix
		req, _ = http.NewRequest(method, e.url+path+target, nil)
	}
	switch flavour {
	case "nginx":
		req.Header.Set("X-Original-Method", method)
		req.Header.Set("X-Original-URI", target)
	case "caddy":
		req.Header.Set("X-Forwarded-Method", method)
		req.Header.Set("X-Forwarded-Uri", target)
	}
	req.Header.Set("X-Forwarded-Host", "tickets.example")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func (e *authEnv) pass(room, visitor string, exp time.Time) string {
	e.t.Helper()
	entry, _, err := e.q.Enter(context.Background(), room, visitor)
	if err != nil || entry.Status != queue.Active {
		e.t.Fatalf("%s not admitted at once: %+v %v", visitor, entry, err)
	}
	if exp.IsZero() {
		exp = entry.ExpiresAt
	}
	p, err := e.keys.SignPass(token.Pass{Room: room, Visitor: visitor, ExpiresAt: exp.Truncate(time.Second)})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// TestAuthCheck: the nginx check answers 204 for an open path or a pass,
// and 401 for everything else, without a body or a place in line; the
// renewed pass comes back in its headers.
func TestAuthCheck(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, Rules{Gate: []string{"/shop/"}, Open: []string{"/shop/static/"}})
	pass := e.pass("sale", "v1", time.Now().Add(10*time.Second)) // half used: renewed
	for _, tc := range []struct {
		target string
		h      map[string]string
		want   int
	}{
		{"/", nil, 204},
		{"/shop/static/app.css", nil, 204},
		{"/shop/x", nil, 401},
		{"/shop/x", map[string]string{"Cookie": "usher_pass=" + pass}, 204},
		{"/shop/x", map[string]string{"Authorization": "Bearer forged"}, 401},
		{"/shop/static/../x", nil, 401},     // not canonical: the wait answer redirects
		{"/shop/static/%2e%2e/x", nil, 401}, // refused
		{"/SHOP/x", nil, 401},
		{"//shop/x", nil, 401},
		{"/_usher/api/v1/rooms", nil, 401}, // usher's own: never through the origin
		{"http://evil/shop/x", nil, 401},
	} {
		res, body := e.ask(CheckPath, "nginx", "GET", tc.target, tc.h)
		if res.StatusCode != tc.want || body != "" {
			t.Errorf("check %s %v: %d %q, want %d and no body", tc.target, tc.h, res.StatusCode, body, tc.want)
		}
		if tc.want == 204 && tc.h != nil && res.Header.Get(wire.PassHeader) == "" {
			t.Errorf("check %s: no renewed pass", tc.target)
		}
		if tc.want == 204 && tc.h != nil && !strings.Contains(res.Header.Get("Set-Cookie"), "usher_pass=") {
			t.Errorf("check %s: the cookie's pass was not renewed in a cookie", tc.target)
		}
	}
	if v, err := e.q.Room(context.Background(), "sale"); err != nil || v.Waiting != 0 {
		t.Errorf("checks took %d places in line (%v); want none", v.Waiting, err)
	}
	if res, _ := e.ask(CheckPath, "", "", "", nil); res.StatusCode != http.StatusBadRequest {
		t.Errorf("a check naming no request: %d, want 400", res.StatusCode)
	}
}

// TestAuthWaitAndForward: the waiting answer for nginx's error_page (the
// wait route) and for Caddy (the forward-auth route itself) is the
// proxy's: 429 with the page or JSON, a 303 with the pass cookie once
// admitted, a 308 to the canonical path, a 400 for a refused one.
func TestAuthWaitAndForward(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ path, flavour string }{{WaitPath, "nginx"}, {AuthPath, "caddy"}} {
		e := newAuthEnv(t, Rules{Gate: []string{"/shop/"}})
		e.pass("sale", "occupant", time.Time{})
		res, body := e.ask(tc.path, tc.flavour, "GET", "/shop/x?seat=1", map[string]string{"Accept": "text/html"})
		if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" || !strings.Contains(body, "<html") {
			t.Fatalf("%s: %d %q, want the waiting page", tc.path, res.StatusCode, body)
		}
		var ticket *http.Cookie
		for _, c := range res.Cookies() {
			if c.Name == wire.RoomTicketCookie("sale") {
				ticket = c
			}
		}
		if ticket == nil {
			t.Fatalf("%s: no ticket cookie", tc.path)
		}
		res, body = e.ask(tc.path, tc.flavour, "GET", "/shop/x", map[string]string{"Accept": "application/json", "Cookie": ticket.Name + "=" + ticket.Value})
		if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, `"position":1`) {
			t.Errorf("%s JSON: %d %s", tc.path, res.StatusCode, body)
		}
		// The occupant leaves; the visitor is admitted and sent back.
		if err := e.q.Leave(context.Background(), "sale", "occupant"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.q.Admit(context.Background(), "sale"); err != nil {
			t.Fatal(err)
		}
		res, _ = e.ask(tc.path, tc.flavour, "GET", "/shop/x?seat=1", map[string]string{"Cookie": ticket.Name + "=" + ticket.Value})
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/shop/x?seat=1" || !strings.Contains(res.Header.Get("Set-Cookie"), "usher_pass=") {
			t.Errorf("%s admitted: %d Location %q Set-Cookie %q", tc.path, res.StatusCode, res.Header.Get("Location"), res.Header.Get("Set-Cookie"))
		}
		if res, _ := e.ask(tc.path, tc.flavour, "GET", "/shop/static/../x", nil); res.StatusCode != http.StatusPermanentRedirect || res.Header.Get("Location") != "/shop/x" {
			t.Errorf("%s non-canonical: %d %q", tc.path, res.StatusCode, res.Header.Get("Location"))
		}
		if res, _ := e.ask(tc.path, tc.flavour, "GET", "/shop/%2e%2e/x", nil); res.StatusCode != http.StatusBadRequest {
			t.Errorf("%s refused path: %d", tc.path, res.StatusCode)
		}
		if res, _ := e.ask(tc.path, tc.flavour, "DELETE", "/shop/x", nil); res.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s DELETE takes no place: %d", tc.path, res.StatusCode)
		}
	}
}

// TestAuthRelease: the release route ends the slot of the pass the
// original request carries, and only that.
func TestAuthRelease(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, Rules{Gate: []string{"/shop/"}})
	pass := e.pass("sale", "v1", time.Time{})
	h := map[string]string{"Cookie": "usher_pass=" + pass}
	if res, _ := e.ask(CheckPath, "nginx", "GET", "/shop/x", h); res.StatusCode != 204 {
		t.Fatalf("before release: %d", res.StatusCode)
	}
	if res, _ := e.ask(ReleasePath, "nginx", "GET", "/shop/done", h); res.StatusCode != 204 {
		t.Fatalf("release: %d", res.StatusCode)
	}
	if res, _ := e.ask(CheckPath, "nginx", "GET", "/shop/x", h); res.StatusCode != 401 {
		t.Errorf("after release: %d, want 401", res.StatusCode)
	}
}

// TestAuthServeReleases: a front proxy's release datagram ends the slot of
// the pass it carries, in either edge's form; a datagram with a forged
// pass, another room's pass or no release at all ends nothing.
func TestAuthServeReleases(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, Rules{Routes: []Route{{Prefix: "/a/", Room: "room-a"}}})
	v1, v2 := e.pass("sale", "v1", time.Time{}), e.pass("room-a", "v2", time.Time{})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.a.ServeReleases(ctx, pc) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeReleases after cancel: %v", err)
		}
	})
	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nginx := func(pass, uri string) string {
		return `<190>Dec  5 12:00:00 usher_release: {"pass":"` + pass + `","authorization":"","method":"GET","uri":"` + uri + `","host":"x","status":"200"}`
	}
	for _, d := range []string{
		"garbage",
		nginx(v1+"x", "/done"),  // forged signature
		nginx(v2, "/done"),      // room-a's pass on sale's path
		nginx("", "/done"),      // no pass
		nginx(v1, "/a/../done"), // not a canonical path
		`{"user_id":"v1","status":200}`,
		`{"request":{"method":"GET","uri":"/a/done","host":"x"},"user_id":"pass= authorization=Bearer ` + v2 + `","status":200}`,
	} {
		if _, err := io.WriteString(c, d); err != nil {
			t.Fatal(err)
		}
	}
	check := func(pass, target string) int {
		res, _ := e.ask(CheckPath, "nginx", "GET", target, map[string]string{"Cookie": "usher_pass=" + pass})
		return res.StatusCode
	}
	testenv.Eventually(t, time.Minute, "v2's slot ended by the Caddy datagram", func() bool { return check(v2, "/a/x") == 401 })
	if st := check(v1, "/x"); st != 204 {
		t.Errorf("v1 after forged datagrams: %d, want 204 (its slot kept)", st)
	}
}

// TestAuthEnvoy: Envoy's ext_authz sends the original request under
// EnvoyPrefix and lets it through only on 200.
func TestAuthEnvoy(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, Rules{Gate: []string{"/shop/"}})
	pass := e.pass("sale", "v1", time.Time{})
	if res, _ := e.ask(EnvoyPrefix, "envoy", "GET", "/shop/x", map[string]string{"Authorization": "Bearer " + pass}); res.StatusCode != 200 || res.Header.Get(wire.VisitorHeader) != "v1" {
		t.Errorf("with the pass: %d Usher-Visitor %q, want 200 naming v1", res.StatusCode, res.Header.Get(wire.VisitorHeader))
	}
	if res, _ := e.ask(EnvoyPrefix, "envoy", "GET", "/about", nil); res.StatusCode != 200 {
		t.Errorf("open path: %d, want 200", res.StatusCode)
	}
	if res, _ := e.ask(EnvoyPrefix, "envoy", "GET", "/shop/x", map[string]string{"Accept": "application/json"}); res.StatusCode != 429 || res.Header.Get("Retry-After") == "" {
		t.Errorf("without a pass: %d Retry-After %q, want the waiting answer 429", res.StatusCode, res.Header.Get("Retry-After"))
	}
}

// TestAuthServesOwnRoutes: the worker and the API answer under Prefix;
// nothing else is served.
func TestAuthServesOwnRoutes(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, Rules{})
	for path, want := range map[string]int{WorkerPath: 200, "/": 404, "/shop/x": 404} {
		res, err := http.Get(e.url + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, res.StatusCode, want)
		}
	}
}
