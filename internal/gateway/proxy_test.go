package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/httpapi"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/token"
	"usher/internal/wire"
)

// env is a proxy on the memory store in front of an httptest origin. No
// scheduler runs: tests admit with q.Admit.
type env struct {
	t    *testing.T
	q    *queue.Queue
	keys *token.Keyring
	reg  *prometheus.Registry
	url  string
	p    *Proxy
}

func newEnv(t *testing.T, origin string, rules Rules, mod ...func(*Config)) *env {
	t.Helper()
	keys, err := token.LoadDir(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
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
	u, err := url.Parse(origin)
	if err != nil {
		t.Fatal(err)
	}
	c := Config{
		Origin: u, Queue: q, Keys: keys, Rules: rules, Registry: reg, InsecureCookies: true,
		API: httpapi.NewServer(httpapi.Config{Queue: q, Keys: keys, AdminKey: "admin", Registry: reg, InsecureCookies: true}),
	}
	for _, m := range mod {
		m(&c)
	}
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return &env{t: t, q: q, keys: keys, reg: reg, url: srv.URL, p: p}
}

func newOrigin(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// helloOrigin answers "origin <path>" and echoes the X-Forwarded headers.
func helloOrigin(w http.ResponseWriter, r *http.Request) {
	for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host"} {
		w.Header().Set("Echo-"+h, r.Header.Get(h))
	}
	fmt.Fprintf(w, "origin %s", r.URL.Path)
}

// admit enters visitor into room and makes it active, returning a pass
// that expires at exp (zero: the slot's expiry).
func (e *env) admit(room, visitor string, exp time.Time) string {
	e.t.Helper()
	ctx := context.Background()
	entry, _, err := e.q.Enter(ctx, room, visitor)
	if err != nil {
		e.t.Fatal(err)
	}
	if entry.Status != queue.Active {
		e.t.Fatalf("%s not admitted at once: %+v", visitor, entry)
	}
	if exp.IsZero() {
		exp = entry.ExpiresAt
	}
	pass, err := e.keys.SignPass(token.Pass{Room: room, Visitor: visitor, ExpiresAt: exp.Truncate(time.Second)})
	if err != nil {
		e.t.Fatal(err)
	}
	return pass
}

func browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar}
}

type response struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, c *http.Client, method, u string, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{res.StatusCode, res.Header, string(b)}
}

func TestWaitingPageHTML(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	e.admit("sale", "occupant", time.Time{}) // takes the only slot

	first := browser(t)
	res := do(t, first, "GET", e.url+"/shop?x=1", map[string]string{"Accept": "text/html"})
	if res.status != http.StatusTooManyRequests {
		t.Fatalf("status = %d, want 429; body %s", res.status, res.body)
	}
	for _, want := range []string{`id="refresh" href="/shop?x=1"`, `aria-live="polite"`, `class="position" id="position">1<`, "Estimated wait"} {
		if !strings.Contains(res.body, want) {
			t.Errorf("waiting page lacks %q:\n%s", want, res.body)
		}
	}
	if strings.Contains(res.body, "origin") {
		t.Errorf("waiting page leaks the origin's answer")
	}
	if res.header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}

	second := browser(t)
	if res := do(t, second, "GET", e.url+"/shop", nil); !strings.Contains(res.body, `class="position" id="position">2<`) {
		t.Errorf("second visitor's page lacks position 2:\n%s", res.body)
	}
	// A reload keeps the place.
	if res := do(t, first, "GET", e.url+"/shop?x=1", nil); !strings.Contains(res.body, `class="position" id="position">1<`) {
		t.Errorf("reload lost position 1:\n%s", res.body)
	}

	// Once admitted, the browser gets the pass cookie and lands on the URL it asked for.
	if err := e.q.Leave(context.Background(), "sale", "occupant"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.q.Admit(context.Background(), "sale"); err != nil {
		t.Fatal(err)
	}
	noFollow := *first
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res = do(t, &noFollow, "GET", e.url+"/shop?x=1", nil)
	if res.status != http.StatusSeeOther || res.header.Get("Location") != "/shop?x=1" {
		t.Fatalf("admitted: status %d Location %q, want 303 to /shop?x=1", res.status, res.header.Get("Location"))
	}
	if c := cookieNamed(res.header, wire.PassCookie); c == nil || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode {
		t.Errorf("pass cookie = %+v, want HttpOnly SameSite=Lax", c)
	}
	if res := do(t, first, "GET", e.url+"/shop?x=1", nil); res.status != 200 || res.body != "origin /shop" {
		t.Errorf("after admission: %d %q, want the origin", res.status, res.body)
	}
}

func cookieNamed(h http.Header, name string) *http.Cookie {
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func TestSecureCookiesByDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{}, func(c *Config) { c.InsecureCookies = false })
	e.admit("sale", "occupant", time.Time{})
	res := do(t, http.DefaultClient, "GET", e.url+"/", nil)
	if cookieNamed(res.header, wire.VisitorCookie) == nil {
		t.Fatalf("no visitor cookie set: %v", res.header.Values("Set-Cookie"))
	}
	for _, c := range (&http.Response{Header: res.header}).Cookies() {
		if !c.Secure {
			t.Errorf("cookie %s not Secure", c.Name)
		}
	}
}

func TestWaitingJSON(t *testing.T) {
	t.Parallel()
	var got http.Header
	e := newEnv(t, newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"cart":[]}`)
	}), Rules{})
	e.admit("sale", "occupant", time.Time{})

	// An app without cookies keeps the ticket and sends it as a Bearer token.
	app := &http.Client{}
	res := do(t, app, "GET", e.url+"/api/cart", map[string]string{"Accept": "application/json"})
	if res.status != http.StatusTooManyRequests || res.header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d type %q, want 429 JSON; %s", res.status, res.header.Get("Content-Type"), res.body)
	}
	var st wire.Entry
	if err := json.Unmarshal([]byte(res.body), &st); err != nil {
		t.Fatal(err)
	}
	if st.State != wire.StateWaiting || st.Position != 1 || st.Ticket == "" || st.PollAfterMS <= 0 {
		t.Fatalf("state = %+v, want waiting at 1 with a ticket and poll_after_ms", st)
	}
	auth := map[string]string{"Accept": "application/json", "Authorization": "Bearer " + st.Ticket}
	res = do(t, app, "GET", e.url+"/api/cart", auth)
	var again wire.Entry
	json.Unmarshal([]byte(res.body), &again)
	if res.status != http.StatusTooManyRequests || again.Position != 1 || again.Ticket != "" {
		t.Fatalf("poll with ticket: %d %+v, want 429 at position 1 and no new ticket", res.status, again)
	}

	if err := e.q.Leave(context.Background(), "sale", "occupant"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.q.Admit(context.Background(), "sale"); err != nil {
		t.Fatal(err)
	}
	res = do(t, app, "GET", e.url+"/api/cart", auth)
	if res.status != 200 || res.body != `{"cart":[]}` {
		t.Fatalf("admitted poll: %d %q, want the origin's answer", res.status, res.body)
	}
	pass := res.header.Get(wire.PassHeader)
	if pass == "" || got == nil {
		t.Fatalf("admitted poll: Usher-Pass %q, origin reached %v", pass, got != nil)
	}
	// From now on the pass is the token.
	res = do(t, app, "GET", e.url+"/api/cart", map[string]string{"Accept": "application/json", "Authorization": "Bearer " + pass})
	if res.status != 200 {
		t.Fatalf("with the pass: %d %s", res.status, res.body)
	}
}

func TestAdmittedReachesOriginAndRenews(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	// A pass with little life left against a fresh slot: half used, so renewed.
	pass := e.admit("sale", "v1", time.Now().Add(10*time.Second))

	res := do(t, http.DefaultClient, "GET", e.url+"/shop", map[string]string{"Authorization": "Bearer " + pass})
	if res.status != 200 || res.body != "origin /shop" {
		t.Fatalf("%d %q, want the origin", res.status, res.body)
	}
	// No PublicHosts: the client's Host is not passed on (edge_test.go).
	for h, want := range map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Proto": "http", "X-Forwarded-Host": ""} {
		if got := res.header.Get("Echo-" + h); got != want {
			t.Errorf("origin saw %s = %q, want %q", h, got, want)
		}
	}
	renewed := res.header.Get(wire.PassHeader)
	if renewed == "" || renewed == pass {
		t.Fatalf("Usher-Pass = %q, want a renewed pass", renewed)
	}
	p, err := e.keys.ParsePass(renewed, "sale")
	if err != nil || !p.ExpiresAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("renewed pass %+v, %v: want a later expiry", p, err)
	}

	// In the cookie, the renewal comes back as a cookie too.
	jar := browser(t)
	u0, _ := url.Parse(e.url)
	jar.Jar.SetCookies(u0, []*http.Cookie{{Name: wire.PassCookie, Value: pass, Path: "/"}})
	res = do(t, jar, "GET", e.url+"/shop", nil)
	if res.status != 200 || cookieNamed(res.header, wire.PassCookie) == nil {
		t.Errorf("cookie pass: %d, Set-Cookie %v; want 200 and a renewed cookie", res.status, res.header.Values("Set-Cookie"))
	}
}

func TestOpenPaths(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{Open: []string{"/static/", "/healthz"}})
	e.admit("sale", "occupant", time.Time{})
	for path, wantOrigin := range map[string]bool{"/static/app.css": true, "/healthz": true, "/healthzx": false, "/": false} {
		res := do(t, http.DefaultClient, "GET", e.url+path, nil)
		if got := res.status == 200 && res.body == "origin "+path; got != wantOrigin {
			t.Errorf("GET %s without pass: %d %q; origin reached %v, want %v", path, res.status, res.body, got, wantOrigin)
		}
	}
}

func TestRouteMapping(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{Routes: []Route{{"/b/", "room-b"}}})
	passB := e.admit("room-b", "vb", time.Time{})
	passSale := e.admit("sale", "vs", time.Time{})
	for _, tc := range []struct {
		path, pass string
		want       int
	}{
		{"/b/seats", passB, 200},
		{"/b/seats", passSale, http.StatusTooManyRequests},
		{"/seats", passB, http.StatusTooManyRequests},
		{"/seats", passSale, 200},
	} {
		res := do(t, http.DefaultClient, "GET", e.url+tc.path, map[string]string{"Authorization": "Bearer " + tc.pass, "Accept": "application/json"})
		if res.status != tc.want {
			t.Errorf("GET %s: %d, want %d (%s)", tc.path, res.status, tc.want, res.body)
		}
	}
}

func TestUsherReleaseFreesTheSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/done" {
			w.Header().Set(wire.ReleaseHeader, "1")
		}
		io.WriteString(w, "ok")
	}), Rules{})
	pass := e.admit("sale", "v1", time.Time{})
	auth := map[string]string{"Authorization": "Bearer " + pass, "Accept": "application/json"}
	res := do(t, http.DefaultClient, "POST", e.url+"/done", auth)
	if res.status != 200 || res.header.Get(wire.ReleaseHeader) != "" {
		t.Fatalf("/done: %d, %s header %q; want 200 and the header stripped", res.status, wire.ReleaseHeader, res.header.Get(wire.ReleaseHeader))
	}
	if c := cookieNamed(res.header, wire.PassCookie); c == nil || c.MaxAge >= 0 {
		t.Errorf("pass cookie after release = %+v, want it deleted", c)
	}
	// The slot is free at once: the next visitor passes straight through.
	if entry, _, err := e.q.Enter(context.Background(), "sale", "v2"); err != nil || entry.Status != queue.Active {
		t.Errorf("next visitor: %+v, %v; want active", entry, err)
	}
	if res := do(t, http.DefaultClient, "GET", e.url+"/", auth); res.status != http.StatusTooManyRequests {
		t.Errorf("old pass after release: %d, want 429 (no longer passes)", res.status)
	}
}

func TestOriginDown(t *testing.T) {
	t.Parallel()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	e := newEnv(t, dead.URL, Rules{Open: []string{"/"}})
	res := do(t, http.DefaultClient, "GET", e.url+"/", nil)
	if res.status != http.StatusBadGateway || !strings.Contains(res.body, "502") {
		t.Errorf("origin down: %d %q, want a 502 page", res.status, res.body)
	}
	if got := e.counter("usher_proxy_origin_responses_total", map[string]string{"room": "sale", "class": "5xx"}); got != 1 {
		t.Errorf("5xx responses counted = %v, want 1", got)
	}
}

// counter reads a counter of the registry by name and labels.
func (e *env) counter(name string, labels map[string]string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func TestOriginTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	origin := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	e := newEnv(t, origin, Rules{Open: []string{"/"}}, func(c *Config) { c.OriginTimeout = 50 * time.Millisecond })
	res := do(t, http.DefaultClient, "GET", e.url+"/slow", nil)
	if res.status != http.StatusGatewayTimeout || !strings.Contains(res.body, "504") {
		t.Errorf("slow origin: %d %q, want a 504 page", res.status, res.body)
	}
}

func TestServerSentEventsStream(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	origin := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select { // hold the stream open until the client has read the event
		case <-done:
		case <-r.Context().Done():
		}
	})
	e := newEnv(t, origin, Rules{})
	pass := e.admit("sale", "v1", time.Time{})
	req, _ := http.NewRequest("GET", e.url+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+pass)
	// A buffering proxy would block until the stream ends: fail, not hang.
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	close(done)
	if err != nil || line != "data: first\n" {
		t.Errorf("first event line = %q, %v; want it before the origin ends the stream", line, err)
	}
}

func TestWebSocketUpgrade(t *testing.T) {
	t.Parallel()
	origin := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "want an upgrade", http.StatusBadRequest)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		rw.Flush()
		line, _ := rw.ReadString('\n') // echo one line
		rw.WriteString("echo " + line)
		rw.Flush()
	})
	e := newEnv(t, origin, Rules{})
	pass := e.admit("sale", "v1", time.Time{})
	u, _ := url.Parse(e.url)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second)) // a failure ends the test, never hangs it
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nAuthorization: Bearer %s\r\n\r\n", u.Host, pass)
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %d, want 101", res.StatusCode)
	}
	io.WriteString(conn, "ping\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "echo ping\n" {
		t.Errorf("echo = %q, %v; want \"echo ping\\n\"", line, err)
	}
}

func TestAPIUnderPrefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	res := do(t, http.DefaultClient, "GET", e.url+"/_usher/healthz", nil)
	if res.status != 200 || !strings.Contains(res.body, "ok") {
		t.Errorf("/_usher/healthz: %d %q", res.status, res.body)
	}
	res = do(t, http.DefaultClient, "POST", e.url+"/_usher/api/v1/rooms/sale/entries", nil)
	if res.status != http.StatusCreated && res.status != http.StatusOK {
		t.Errorf("enter through the prefix: %d %s", res.status, res.body)
	}
}

func TestETARange(t *testing.T) {
	t.Parallel()
	en, err := loadText("en")
	if err != nil {
		t.Fatal(err)
	}
	ko, err := loadText("ko")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		t    Text
		secs int64
		want string
	}{
		{en, 0, "less than a minute"}, {en, 59, "less than a minute"}, {en, 300, "about 4–6 minutes"}, {en, 60, "about 1–2 minutes"},
		{ko, 30, "1분 이내"}, {ko, 300, "약 4–6분"},
	} {
		if got := etaRange(c.t, c.secs); got != c.want {
			t.Errorf("etaRange(%s, %d) = %q, want %q", c.t.Lang, c.secs, got, c.want)
		}
	}
	// The entry's own range, in whole minutes (low down, high up).
	for _, c := range []struct {
		t    Text
		e    wire.Entry
		want string
	}{
		{en, wire.Entry{ETASeconds: 300}, "about 4–6 minutes"},
		{en, wire.Entry{ETASeconds: 40, ETARangeSeconds: [2]int64{30, 59}}, "less than a minute"},
		{en, wire.Entry{ETASeconds: 58, ETARangeSeconds: [2]int64{50, 66}}, "about 1–2 minutes"},
		{en, wire.Entry{ETASeconds: 320, ETARangeSeconds: [2]int64{290, 355}}, "about 4–6 minutes"},
		{en, wire.Entry{ETASeconds: 150, ETARangeSeconds: [2]int64{125, 175}}, "about 2–3 minutes"},
		{en, wire.Entry{ETASeconds: 130, ETARangeSeconds: [2]int64{121, 180}}, "about 2–3 minutes"},
		{en, wire.Entry{ETASeconds: 125, ETARangeSeconds: [2]int64{120, 120}}, "about 2 minutes"},
		{ko, wire.Entry{ETASeconds: 320, ETARangeSeconds: [2]int64{290, 355}}, "약 4–6분"},
	} {
		if got := entryETA(c.t, c.e); got != c.want {
			t.Errorf("entryETA(%s, %d %v) = %q, want %q", c.t.Lang, c.e.ETASeconds, c.e.ETARangeSeconds, got, c.want)
		}
	}
}

// TestLargeUpload streams a 32 MiB body through the proxy to the origin:
// every byte arrives, and the proxy does not buffer or cut it.
func TestLargeUpload(t *testing.T) {
	t.Parallel()
	const size = 32 << 20
	e := newEnv(t, newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d %v", n, err)
	}), Rules{})
	pass := e.admit("sale", "uploader", time.Time{})
	req, err := http.NewRequest("POST", e.url+"/upload", bytes.NewReader(make([]byte, size)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+pass)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if want := fmt.Sprintf("%d <nil>", size); res.StatusCode != 200 || string(body) != want {
		t.Errorf("upload: %d %q, want 200 %q", res.StatusCode, body, want)
	}
}
