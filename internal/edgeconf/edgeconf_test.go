package edgeconf_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/edgeconf"
	"usher/internal/httpapi"
	"usher/internal/sale"
	"usher/internal/testenv"
)

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	good := edgeconf.Config{Listen: "127.0.0.1:8080", Origin: "127.0.0.1:8082", Usher: "127.0.0.1:8081", Dir: "/tmp/edge"}
	for _, tc := range []struct {
		name string
		edit func(*edgeconf.Config)
		want string
	}{
		{"listen without port", func(c *edgeconf.Config) { c.Listen = "127.0.0.1" }, "listen"},
		{"listen host name", func(c *edgeconf.Config) { c.Listen = "example.com:80" }, "IP address"},
		{"port 0", func(c *edgeconf.Config) { c.Listen = "127.0.0.1:0" }, "port"},
		{"port too big", func(c *edgeconf.Config) { c.Listen = "127.0.0.1:65536" }, "port"},
		{"port not canonical", func(c *edgeconf.Config) { c.Listen = "127.0.0.1:080" }, "port"},
		{"origin path", func(c *edgeconf.Config) { c.Origin = "http://127.0.0.1:8082/app" }, "no path"},
		{"origin scheme", func(c *edgeconf.Config) { c.Origin = "ftp://127.0.0.1:21" }, "scheme"},
		{"origin injection", func(c *edgeconf.Config) { c.Origin = "127.0.0.1:8082; return 200" }, "whitespace"},
		{"origin brace", func(c *edgeconf.Config) { c.Origin = "a{b:80" }, "whitespace"},
		{"usher https", func(c *edgeconf.Config) { c.Usher = "https://127.0.0.1:8081" }, "scheme"},
		{"usher newline", func(c *edgeconf.Config) { c.Usher = "127.0.0.1:8081\nx" }, "whitespace"},
		{"usher host", func(c *edgeconf.Config) { c.Usher = "under_score:8081" }, "DNS name"},
		{"release", func(c *edgeconf.Config) { c.Release = "127.0.0.1" }, "release"},
		{"dir relative", func(c *edgeconf.Config) { c.Dir = "edge" }, "absolute"},
		{"dir unclean", func(c *edgeconf.Config) { c.Dir = "/tmp/../etc" }, "clean"},
		{"dir variable", func(c *edgeconf.Config) { c.Dir = "/tmp/$host" }, "whitespace"},
		{"dir missing", func(c *edgeconf.Config) { c.Dir = "" }, "dir is required"},
		{"user", func(c *edgeconf.Config) { c.User = "root;" }, "whitespace"},
		{"user name", func(c *edgeconf.Config) { c.User = "9/x" }, "user"},
		{"host", func(c *edgeconf.Config) { c.Hosts = []string{"exa mple.com"} }, "whitespace"},
		{"host name", func(c *edgeconf.Config) { c.Hosts = []string{"-x.com"} }, "host"},
		{"header bytes", func(c *edgeconf.Config) { c.MaxHeaderBytes = 1 << 10 }, "max header bytes"},
		{"header timeout", func(c *edgeconf.Config) { c.HeaderTimeout = time.Millisecond }, "header timeout"},
		{"second usher", func(c *edgeconf.Config) { c.Ushers = []string{"127.0.0.1:8081;"} }, "whitespace"},
		{"second usher scheme", func(c *edgeconf.Config) { c.Ushers = []string{"https://127.0.0.1:8091"} }, "scheme"},
		{"open pattern", func(c *edgeconf.Config) { c.Open = []string{"/static/{x}"} }, "path pattern"},
		{"gate pattern", func(c *edgeconf.Config) { c.Gate = []string{"shop"} }, "path pattern"},
	} {
		c := good
		tc.edit(&c)
		_, err := edgeconf.Nginx(c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Nginx error %v, want one saying %q", tc.name, err, tc.want)
		}
		if tc.name == "dir missing" {
			continue // Caddy needs none
		}
		if _, err := edgeconf.Caddy(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Caddy error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := edgeconf.Nginx(good); err != nil {
		t.Errorf("good config: %v", err)
	}
	c := good
	c.Dir = ""
	if _, err := edgeconf.Caddy(c); err != nil {
		t.Errorf("Caddy without dir: %v", err)
	}
}

// TestValidate: the real binaries accept every shape of rendered file.
func TestValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []edgeconf.Config{
		{Listen: "127.0.0.1:8080", Origin: "127.0.0.1:8082", Usher: "127.0.0.1:8081"},
		{Listen: ":8080", Origin: "https://localhost:8443", Usher: "http://localhost:8081", // nginx -t resolves names
			Release: "127.0.0.1:8083", User: "www-data", Hosts: []string{"example.com", "*.example.org"}},
		{Listen: "[::1]:8080", Origin: "http://[::1]:80", Usher: "[::1]:8081", Release: "[::1]:8083", InsecureCookies: true},
		{Listen: "127.0.0.1:8090", Origin: "127.0.0.1:8082", Ushers: []string{"127.0.0.1:8081", "http://localhost:8091"},
			Open: []string{"/static/", "/healthz", "/café/"}, Gate: []string{"/", "/static/ſecret/"}, FailOpen: true},
		{Listen: "127.0.0.1:8100", Origin: "127.0.0.1:8082", Usher: "127.0.0.1:8081", Ushers: []string{"127.0.0.1:8091"},
			Open: []string{"/static/"}, Gate: []string{"/shop/", "/api"}},
	} {
		// Each subtest sets its own Dir on its own copy: the two run in parallel.
		t.Run("nginx "+c.Listen, func(t *testing.T) {
			t.Parallel()
			bin := testenv.NginxBin(t)
			c := c
			c.Dir = t.TempDir()
			conf, err := edgeconf.Nginx(c)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(c.Dir, "nginx.conf")
			os.WriteFile(file, []byte(conf), 0o644)
			if out, err := exec.Command(bin, "-t", "-q", "-p", c.Dir, "-c", file).CombinedOutput(); err != nil {
				t.Errorf("nginx -t: %v\n%s\n%s", err, out, conf)
			}
		})
		t.Run("caddy "+c.Listen, func(t *testing.T) {
			t.Parallel()
			bin := testenv.CaddyBin(t)
			dir := t.TempDir()
			c := c
			c.Dir = dir
			conf, err := edgeconf.Caddy(c)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, "Caddyfile")
			os.WriteFile(file, []byte(conf), 0o644)
			cmd := exec.Command(bin, "validate", "--adapter", "caddyfile", "--config", file)
			cmd.Env = testenv.CaddyEnv(dir)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("caddy validate: %v\n%s\n%s", err, out, conf)
			}
		})
	}
}

func TestParseRelease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want edgeconf.Release
	}{
		{`<190>Dec  4 23:31:17 usher_release: {"pass":"p.q","authorization":"Bearer t","visitor":"v","room":"r","method":"GET","uri":"/a?b","status":"200"}` + "\n",
			edgeconf.Release{Edge: "nginx", Pass: "p.q", Authorization: "Bearer t", Visitor: "v", Room: "r", Method: "GET", URI: "/a?b", Status: 200}},
		{`{"level":"info","logger":"http.log.access.log0","msg":"handled request","request":{"method":"POST","uri":"/done"},"user_id":"pass= authorization=Bearer a b","status":204}`,
			edgeconf.Release{Edge: "caddy", Authorization: "Bearer a b", Method: "POST", URI: "/done", Status: 204}},
	} {
		got, err := edgeconf.ParseRelease([]byte(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("ParseRelease(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "<190>x usher_release: {", `{"user_id":"someone"}`, "garbage"} {
		if _, err := edgeconf.ParseRelease([]byte(in)); err == nil {
			t.Errorf("ParseRelease(%q): no error", in)
		}
	}
}

// seen is one request a fake server received.
type seen struct {
	Method, URI string
	Header      http.Header
	Body        string
}

// recorder keeps what a fake server received.
type recorder struct {
	mu   sync.Mutex
	reqs []seen
}

func (rc *recorder) add(r *http.Request) seen {
	b, _ := io.ReadAll(r.Body)
	s := seen{r.Method, r.RequestURI, r.Header.Clone(), string(b)}
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, s)
	rc.mu.Unlock()
	return s
}

func (rc *recorder) all() []seen {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]seen(nil), rc.reqs...)
}

// since returns what arrived after the first n.
func (rc *recorder) since(n int) []seen { return rc.all()[n:] }

func (rc *recorder) len() int { rc.mu.Lock(); defer rc.mu.Unlock(); return len(rc.reqs) }

// fakeUsher speaks usher auth's side of the protocol, minimally: a pass
// is valid while its slot is in slots; a target under /open passes
// without one; one under /bad is refused.
type fakeUsher struct {
	srv      *httptest.Server
	auth     recorder
	wait     recorder
	api      recorder
	mu       sync.Mutex
	release  string            // UDP address of the release listener
	slots    map[string]string // pass → visitor
	released []edgeconf.Release
}

const waitingPage = "<html>waiting page</html>"

func newFakeUsher(t *testing.T) *fakeUsher {
	u := &fakeUsher{slots: map[string]string{"ok": "v1", "rel": "v2"}}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			rel, err := edgeconf.ParseRelease(buf[:n])
			if err != nil {
				t.Errorf("release datagram %q: %v", buf[:n], err)
				continue
			}
			u.mu.Lock()
			pass := rel.Pass
			if pass == "" {
				pass = strings.TrimPrefix(rel.Authorization, "Bearer ")
			}
			if _, ok := u.slots[pass]; ok { // "verified"
				delete(u.slots, pass)
				u.released = append(u.released, rel)
			}
			u.mu.Unlock()
		}
	}()
	u.release = pc.LocalAddr().String()
	return u
}

func (u *fakeUsher) addr() string { return strings.TrimPrefix(u.srv.URL, "http://") }

func (u *fakeUsher) visitor(r *http.Request) string {
	pass := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if c, err := r.Cookie("usher_pass"); err == nil {
		pass = c.Value
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.slots[pass]
}

func (u *fakeUsher) releases() []edgeconf.Release {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]edgeconf.Release(nil), u.released...)
}

func waiting(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "5")
	w.Header().Add("Set-Cookie", "usher_ticket_r1=t1; Path=/")
	w.Header().Add("Set-Cookie", "usher_vid=vid; Path=/")
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(http.StatusTooManyRequests)
	io.WriteString(w, waitingPage)
}

func (u *fakeUsher) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/_usher/auth", "/_usher/auth/check":
		u.auth.add(r)
		target, caddy := r.Header.Get("X-Original-URI"), false
		if target == "" {
			target, caddy = r.Header.Get("X-Forwarded-Uri"), true
		}
		switch v := u.visitor(r); {
		case target == "":
			w.WriteHeader(http.StatusBadRequest)
		case strings.HasPrefix(target, "/bad"):
			if caddy {
				w.WriteHeader(http.StatusBadRequest)
			} else {
				w.WriteHeader(http.StatusForbidden)
			}
		case strings.HasPrefix(target, "/open"):
			w.WriteHeader(http.StatusNoContent)
		case v != "":
			pass := "ok"
			if v == "v2" {
				pass = "rel"
			}
			w.Header().Set("Usher-Pass", pass)
			w.Header().Add("Set-Cookie", "usher_pass="+pass+"; Path=/; HttpOnly")
			w.Header().Set("Usher-Visitor", v)
			w.Header().Set("Usher-Room", "r1")
			w.WriteHeader(http.StatusOK)
		case caddy:
			waiting(w)
		default:
			w.WriteHeader(http.StatusUnauthorized)
		}
	case "/_usher/auth/wait":
		s := u.wait.add(r)
		if c, err := r.Cookie("admit"); err == nil && c.Value == "1" {
			w.Header().Add("Set-Cookie", "usher_pass=ok; Path=/")
			http.Redirect(w, r, s.Header.Get("X-Original-URI"), http.StatusSeeOther)
			return
		}
		waiting(w)
	default:
		u.api.add(r)
		fmt.Fprintf(w, "usher api %s", r.RequestURI)
	}
}

// newOrigin is a logging origin: /release answers Usher-Release: 1, /ws
// switches to an echo protocol when asked to upgrade.
func newOrigin(t *testing.T, rc *recorder) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := rc.add(r)
		if strings.HasPrefix(r.URL.Path, "/ws") && r.Header.Get("Upgrade") != "" {
			testenv.EchoUpgrade(w, r)
			return
		}
		w.Header().Add("Set-Cookie", "origin=1; Path=/")
		if strings.HasPrefix(r.URL.Path, "/release") {
			w.Header().Set("Usher-Release", "1")
		}
		fmt.Fprintf(w, "origin %s %s", s.Method, s.URI)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// raw sends req (a request without its final blank line) as is and reads
// the answer.
func raw(t *testing.T, base, req string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req = strings.ReplaceAll(strings.TrimSpace(req), "\n", "\r\n") + "\r\nConnection: close\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func do(t *testing.T, method, url, body string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	cl := http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// edge runs one front proxy over a fake usher and a logging origin.
type edge struct {
	name   string
	base   string
	usher  *fakeUsher
	origin *recorder
}

func startEdge(t *testing.T, name string, hosts []string) *edge {
	return startEdgeWith(t, name, func(c *edgeconf.Config) { c.Hosts = hosts })
}

// startEdgeWith is startEdge with the configuration edited first.
func startEdgeWith(t *testing.T, name string, edit func(*edgeconf.Config)) *edge {
	u := newFakeUsher(t)
	rc := &recorder{}
	o := newOrigin(t, rc)
	c := edgeconf.Config{
		Listen: testenv.ClosedAddr(t), Origin: o.URL, Usher: u.addr(), Release: u.release,
		Dir: t.TempDir(), InsecureCookies: true,
	}
	edit(&c)
	e := &edge{name: name, usher: u, origin: rc}
	switch name {
	case "nginx":
		testenv.NginxBin(t)
		conf, err := edgeconf.Nginx(c)
		if err != nil {
			t.Fatal(err)
		}
		e.base = testenv.Nginx(t, conf)
	case "caddy":
		testenv.CaddyBin(t)
		conf, err := edgeconf.Caddy(c)
		if err != nil {
			t.Fatal(err)
		}
		e.base = testenv.Caddy(t, conf)
	}
	return e
}

func cookies(resp *http.Response) string {
	return strings.Join(resp.Header.Values("Set-Cookie"), " | ")
}

// TestEdge runs each rendered front proxy for real between a fake usher
// and a logging origin.
func TestEdge(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"nginx", "caddy"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := startEdge(t, name, nil)
			testEdge(t, e)
		})
	}
}

func testEdge(t *testing.T, e *edge) {
	nginx := e.name == "nginx"
	pass := hdr("Cookie", "usher_pass=ok")

	t.Run("waiting GET", func(t *testing.T) {
		n := e.origin.len()
		resp, body := do(t, "GET", e.base+"/page?x=1", "", hdr("Accept", "text/html"))
		if resp.StatusCode != 429 || body != waitingPage || resp.Header.Get("Retry-After") != "5" {
			t.Errorf("answer %d %q Retry-After %q, want the waiting page", resp.StatusCode, body, resp.Header.Get("Retry-After"))
		}
		if c := cookies(resp); !strings.Contains(c, "usher_ticket_r1=t1") || !strings.Contains(c, "usher_vid=vid") {
			t.Errorf("Set-Cookie %q, want both of usher's", c)
		}
		if got := e.origin.since(n); len(got) != 0 {
			t.Errorf("the origin saw %v", got)
		}
	})

	t.Run("waiting POST", func(t *testing.T) {
		na, nw := e.usher.auth.len(), e.usher.wait.len()
		resp, body := do(t, "POST", e.base+"/form?q=2", "hello=body", hdr("Content-Type", "application/x-www-form-urlencoded", "X-Custom", "c"))
		if resp.StatusCode != 429 || body != waitingPage {
			t.Errorf("answer %d %q, want the waiting page", resp.StatusCode, body)
		}
		auth := e.usher.auth.since(na)
		if len(auth) != 1 || auth[0].Method != "GET" || auth[0].Body != "" {
			t.Fatalf("auth requests %+v, want one GET without a body", auth)
		}
		if nginx {
			if m := auth[0].Header.Get("X-Original-Method"); m != "POST" {
				t.Errorf("X-Original-Method %q", m)
			}
			// The body is never read for usher: a refused upload is not
			// stored.
			w := e.usher.wait.since(nw)
			if len(w) != 1 || w[0].Header.Get("X-Original-Method") != "POST" || w[0].Body != "" || w[0].URI != "/_usher/auth/wait" ||
				w[0].Header.Get("X-Original-URI") != "/form?q=2" || w[0].Header.Get("X-Custom") != "c" {
				t.Errorf("wait requests %+v, want the POST named, with its headers and without its body", w)
			}
		} else if m := auth[0].Header.Get("X-Forwarded-Method"); m != "POST" {
			t.Errorf("X-Forwarded-Method %q", m)
		}
	})

	if nginx {
		t.Run("admitted on wait", func(t *testing.T) {
			resp, _ := do(t, "GET", e.base+"/page?z=1", "", hdr("Cookie", "admit=1"))
			if resp.StatusCode != 303 || resp.Header.Get("Location") != "/page?z=1" || !strings.Contains(cookies(resp), "usher_pass=ok") {
				t.Errorf("answer %d Location %q Set-Cookie %q, want usher's 303", resp.StatusCode, resp.Header.Get("Location"), cookies(resp))
			}
		})
		t.Run("refused", func(t *testing.T) {
			if resp, _ := do(t, "GET", e.base+"/bad", "", pass); resp.StatusCode != 403 {
				t.Errorf("answer %d, want 403", resp.StatusCode)
			}
		})
	} else {
		t.Run("refused", func(t *testing.T) {
			if resp, _ := do(t, "GET", e.base+"/bad", "", pass); resp.StatusCode != 400 {
				t.Errorf("answer %d, want 400", resp.StatusCode)
			}
		})
	}

	t.Run("passed", func(t *testing.T) {
		n := e.origin.len()
		resp, body := do(t, "POST", e.base+"/a/b?x=1", "data", pass)
		if resp.StatusCode != 200 || body != "origin POST /a/b?x=1" {
			t.Fatalf("answer %d %q, want the origin's", resp.StatusCode, body)
		}
		if c := cookies(resp); !strings.Contains(c, "usher_pass=ok; Path=/; HttpOnly") || !strings.Contains(c, "origin=1") {
			t.Errorf("Set-Cookie %q, want usher's renewed pass and the origin's", c)
		}
		if p := resp.Header.Get("Usher-Pass"); p != "ok" {
			t.Errorf("Usher-Pass %q", p)
		}
		// It carries the renewed pass: stored by no cache.
		if cc, vary := resp.Header.Values("Cache-Control"), strings.Join(resp.Header.Values("Vary"), ", "); len(cc) != 1 || cc[0] != "private, no-store" ||
			!strings.Contains(vary, "Cookie") || !strings.Contains(vary, "Authorization") {
			t.Errorf("Cache-Control %q Vary %q, want a private answer stored by no cache", cc, vary)
		}
		o := e.origin.since(n)
		if len(o) != 1 || o[0].Body != "data" || o[0].Header.Get("Usher-Visitor") != "v1" || o[0].Header.Get("Usher-Room") != "r1" {
			t.Errorf("origin saw %+v, want the body and the visitor", o)
		}
	})

	t.Run("open path", func(t *testing.T) {
		resp, body := do(t, "GET", e.base+"/open/x", "", nil)
		if resp.StatusCode != 200 || body != "origin GET /open/x" {
			t.Errorf("answer %d %q", resp.StatusCode, body)
		}
		if cc := resp.Header.Get("Cache-Control"); cc != "" {
			t.Errorf("open answer has Cache-Control %q", cc)
		}
	})

	t.Run("raw target", func(t *testing.T) {
		na, no := e.usher.auth.len(), e.origin.len()
		const target = "/a//b/../c/%2e%2e/d?x=%2F"
		resp, _ := raw(t, e.base, "GET "+target+" HTTP/1.1\nHost: 127.0.0.1\nCookie: usher_pass=ok")
		if resp.StatusCode != 200 {
			t.Errorf("answer %d", resp.StatusCode)
		}
		auth, o := e.usher.auth.since(na), e.origin.since(no)
		header := "X-Forwarded-Uri"
		if nginx {
			header = "X-Original-URI"
		}
		if len(auth) != 1 || auth[0].Header.Get(header) != target {
			t.Errorf("auth requests %+v, want %s %s", auth, header, target)
		}
		if len(o) != 1 || o[0].URI != target {
			t.Errorf("origin requests %+v, want %s", o, target)
		}
	})

	t.Run("usher routes", func(t *testing.T) {
		na, no, nu := e.usher.auth.len(), e.origin.len(), e.usher.api.len()
		resp, body := do(t, "GET", e.base+"/_usher/x?y=1", "", hdr("X-Original-URI", "/forged"))
		if resp.StatusCode != 200 || body != "usher api /_usher/x?y=1" {
			t.Errorf("answer %d %q", resp.StatusCode, body)
		}
		if api := e.usher.api.since(nu); len(api) != 1 || api[0].Header.Get("X-Original-URI") != "" {
			t.Errorf("usher api saw %+v, want no X-Original-URI", api)
		}
		for _, p := range []string{"/_usher/auth", "/_usher/auth?x", "/_usher//auth", "/_usher/%61uth", "/_usher/auth/wait", "/_usher/auth/check"} {
			if resp, _ := raw(t, e.base, "GET "+p+" HTTP/1.1\nHost: 127.0.0.1"); resp.StatusCode != 404 {
				t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
			}
		}
		if e.usher.auth.len() != na || e.origin.len() != no {
			t.Error("usher routes were checked or reached the origin")
		}
	})

	// The operators' routes are on usher's admin listener only: the edge
	// answers them 404 itself, as usher's visitors' listener would.
	t.Run("operators' routes", func(t *testing.T) {
		nu, no := e.usher.api.len(), e.origin.len()
		for _, p := range []string{"/_usher/console/", "/_usher/console", "/_usher/console/api/v1/rooms/sale", "/_usher/metrics",
			"/_usher/api/v1/rooms", "/_usher/api/v1/rooms/sale", "/_usher/api/v1/rooms/sale/invites", "/_usher/api/v1/bypass",
			"/_usher/api/v1/schedules/7/sales", "/_usher/api/v1/%72ooms"} {
			resp, body := raw(t, e.base, "GET "+p+" HTTP/1.1\nHost: 127.0.0.1\nAuthorization: Bearer k")
			if resp.StatusCode != 404 || !strings.Contains(body, `"code":"not_found"`) || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("GET %s: %d %s %q, want 404 with usher's not_found JSON", p, resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
		}
		if api := e.usher.api.since(nu); len(api) != 0 || e.origin.len() != no {
			t.Errorf("usher got %d of the operators' routes (want none), the origin %d", len(api), e.origin.len()-no)
		}
		for _, p := range []string{"/_usher/api/v1/rooms/sale/entries/me", "/_usher/api/v1/schedules/7/seats", "/_usher/consoles"} {
			if resp, _ := do(t, "GET", e.base+p, "", nil); resp.StatusCode != 200 {
				t.Errorf("GET %s: %d, want usher's answer", p, resp.StatusCode)
			}
		}
		if got := e.usher.api.since(nu); len(got) != 3 {
			t.Errorf("usher got %d of the visitors' routes, want 3", len(got))
		}
	})

	t.Run("h2c", func(t *testing.T) {
		n := e.origin.len()
		resp, body := raw(t, e.base, "GET /ws/h2c HTTP/1.1\nHost: 127.0.0.1\nCookie: usher_pass=ok\n"+
			"Connection: Upgrade, HTTP2-Settings\nUpgrade: h2c\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA")
		if resp.StatusCode != 200 || body != "origin GET /ws/h2c" {
			t.Errorf("answer %d %q, want the origin's plain answer", resp.StatusCode, body)
		}
		if o := e.origin.since(n); len(o) != 1 || o[0].Header.Get("Upgrade") != "" || o[0].Header.Get("HTTP2-Settings") != "" {
			t.Errorf("origin saw %+v, want no upgrade", o)
		}
	})

	t.Run("websocket", func(t *testing.T) {
		c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GET /ws/x HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: usher_pass=ok\r\nUpgrade: websocket\r\n"+
			"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 101 || !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket") {
			t.Fatalf("answer %d, want 101", resp.StatusCode)
		}
		io.WriteString(c, "hello\n")
		if line, _ := br.ReadString('\n'); line != "echo:hello\n" {
			t.Errorf("through the tunnel: %q", line)
		}
	})

	t.Run("headers stripped", func(t *testing.T) {
		n := e.origin.len()
		h := hdr("Cookie", "usher_pass=ok", "X-Real-IP", "6.6.6.6", "True-Client-IP", "6.6.6.6", "X-Client-IP", "6.6.6.6",
			"CF-Connecting-IP", "6.6.6.6", "X-Forwarded-For", "6.6.6.6", "X-Forwarded-Host", "evil", "X-Forwarded-Prefix", "/evil",
			"X-Forwarded-Port", "1", "Forwarded", "for=6.6.6.6", "Usher-Visitor", "forged", "Usher-Room", "forged",
			"Usher-Pass", "forged", "Usher-Challenge", "forged", "X-Original-URI", "/forged", "X-Forwarded-Uri", "/forged",
			"X-HTTP-Method-Override", "DELETE", "Usher-Other", "forged")
		h.Set("Connection", "Usher-Visitor, Usher-Room")
		if resp, _ := do(t, "GET", e.base+"/strip", "", h); resp.StatusCode != 200 {
			t.Fatalf("answer %d", resp.StatusCode)
		}
		o := e.origin.since(n)
		if len(o) != 1 {
			t.Fatalf("origin saw %d requests", len(o))
		}
		got := o[0].Header
		for _, name := range []string{"True-Client-IP", "X-Client-IP", "CF-Connecting-IP", "X-Forwarded-Host", "X-Forwarded-Prefix",
			"X-Forwarded-Port", "Forwarded", "Usher-Pass", "Usher-Challenge", "X-Original-URI", "X-Forwarded-Uri", "X-HTTP-Method-Override"} {
			if v := got.Values(name); len(v) != 0 {
				t.Errorf("origin got %s: %q", name, v)
			}
		}
		if v := got.Values("X-Forwarded-For"); len(v) != 1 || v[0] != "127.0.0.1" {
			t.Errorf("origin got X-Forwarded-For %q, want the client only", v)
		}
		if v := got.Get("X-Real-IP"); v != "" && v != "127.0.0.1" {
			t.Errorf("origin got X-Real-IP %q", v)
		}
		if got.Get("Usher-Visitor") != "v1" || got.Get("Usher-Room") != "r1" {
			t.Errorf("origin got Usher-Visitor %q Usher-Room %q, want the check's", got.Values("Usher-Visitor"), got.Values("Usher-Room"))
		}
		if !nginx && got.Get("Usher-Other") != "" { // nginx strips usher headers by name only
			t.Errorf("origin got Usher-Other %q", got.Get("Usher-Other"))
		}
	})

	t.Run("release", func(t *testing.T) {
		h := hdr("Cookie", "usher_pass=rel", "Authorization", "Bearer tok")
		resp, body := do(t, "GET", e.base+"/release?z=1", "", h)
		if resp.StatusCode != 200 || body != "origin GET /release?z=1" {
			t.Fatalf("answer %d %q", resp.StatusCode, body)
		}
		if v := resp.Header.Values("Usher-Release"); len(v) != 0 {
			t.Errorf("the client got Usher-Release %q", v)
		}
		if p := resp.Header.Values("Usher-Pass"); len(p) != 0 {
			t.Errorf("the client got Usher-Pass %q after a release", p)
		}
		if c := cookies(resp); !strings.Contains(c, "usher_pass=; Path=/; Max-Age=0") || strings.Contains(c, "usher_pass=rel") || !strings.Contains(c, "origin=1") {
			t.Errorf("Set-Cookie %q, want the pass cleared and the origin's", c)
		}
		testenv.Eventually(t, 10*time.Second, "usher to hear of the release", func() bool { return len(e.usher.releases()) > 0 })
		rel := e.usher.releases()[0]
		if rel.Edge != e.name || rel.Pass != "rel" || rel.Authorization != "Bearer tok" || rel.URI != "/release?z=1" || rel.Method != "GET" || rel.Status != 200 {
			t.Errorf("release %+v", rel)
		}
		if resp, _ := do(t, "GET", e.base+"/page", "", hdr("Cookie", "usher_pass=rel")); resp.StatusCode != 429 {
			t.Errorf("after the release: %d, want 429", resp.StatusCode)
		}
		if got := e.usher.releases(); len(got) != 1 {
			t.Errorf("releases %+v, want only the one", got)
		}
	})

	t.Run("origin saw only passes", func(t *testing.T) {
		for _, s := range e.origin.all() {
			if strings.HasPrefix(s.URI, "/open") {
				continue
			}
			if v := s.Header.Get("Usher-Visitor"); v != "v1" && v != "v2" || !strings.Contains(s.Header.Get("Cookie"), "usher_pass=") {
				t.Errorf("origin saw %s %s without a pass (visitor %q)", s.Method, s.URI, v)
			}
		}
	})

	t.Run("usher down", func(t *testing.T) {
		e.usher.srv.Close()
		// Fail closed: the edge's own 503, a page or usher's error JSON,
		// with Retry-After, never the origin's answer.
		n := e.origin.len()
		resp, body := do(t, "GET", e.base+"/page", "", pass)
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, "High demand") {
			t.Errorf("browser: %d Retry-After %q %s %q, want 503 with the edge's page", resp.StatusCode,
				resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"), body)
		}
		resp, body = do(t, "POST", e.base+"/page", "x", hdr("Cookie", "usher_pass=ok", "Accept", "application/json"))
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || resp.Header.Get("Content-Type") != "application/json" ||
			!strings.Contains(body, `"code":"unavailable"`) {
			t.Errorf("JSON client: %d Retry-After %q %s %q, want 503 with usher's error JSON", resp.StatusCode,
				resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"), body)
		}
		if resp, body := do(t, "GET", e.base+"/_usher/api/v1/rooms/sale/entries/me", "", nil); resp.StatusCode != 503 || !strings.Contains(body, `"code":"unavailable"`) {
			t.Errorf("usher's API: %d %q, want 503 with usher's error JSON", resp.StatusCode, body)
		}
		if got := e.origin.since(n); len(got) > 0 {
			t.Errorf("fail closed, the origin got %s %s", got[0].Method, got[0].URI)
		}
	})
}

// TestEdgeHosts: with public host names, other Hosts are answered 421 and
// the origin learns the public host.
func TestEdgeHosts(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"nginx", "caddy"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := startEdge(t, name, []string{"127.0.0.1"})
			if resp, _ := raw(t, e.base, "GET /page HTTP/1.1\nHost: evil.example\nCookie: usher_pass=ok"); resp.StatusCode != 421 {
				t.Errorf("other host: %d, want 421", resp.StatusCode)
			}
			resp, _ := do(t, "GET", e.base+"/page", "", hdr("Cookie", "usher_pass=ok", "X-Forwarded-Host", "evil"))
			if resp.StatusCode != 200 {
				t.Fatalf("own host: %d", resp.StatusCode)
			}
			o := e.origin.all()
			if len(o) != 1 || !strings.HasPrefix(o[0].Header.Get("X-Forwarded-Host"), "127.0.0.1") {
				t.Errorf("origin saw %+v, want X-Forwarded-Host 127.0.0.1", o)
			}
		})
	}
}

// TestEdgeHeaderBounds: each rendered front proxy refuses a request whose
// headers pass MaxHeaderBytes, serves one within it, and drops a
// connection whose headers do not end within HeaderTimeout.
func TestEdgeHeaderBounds(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"nginx", "caddy"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := startEdgeWith(t, name, func(c *edgeconf.Config) { c.HeaderTimeout = time.Second })
			headers := func(n int) string {
				var b strings.Builder
				for i := range n {
					fmt.Fprintf(&b, "X-Filler-%d: %s\r\n", i, strings.Repeat("f", 1<<10))
				}
				return b.String()
			}
			send := func(head string) (int, error) {
				c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second)) // a failure ends the test, never hangs it
				io.WriteString(c, head)
				res, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					return 0, err
				}
				res.Body.Close()
				return res.StatusCode, nil
			}
			if st, err := send("GET /open/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + headers(20) + "\r\n"); st != 200 {
				t.Errorf("20 KiB of headers: %d %v, want 200", st, err)
			}
			if st, err := send("GET /open/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + headers(80) + "\r\n"); err == nil && st < 400 {
				t.Errorf("80 KiB of headers: %d, want a refusal", st)
			}
			// Headers that never end: the edge closes the connection (with
			// or without a 408) instead of holding it.
			if st, err := send("GET /open/x HTTP/1.1\r\nHost: x\r\n"); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) ||
				err == nil && st != http.StatusRequestTimeout {
				t.Errorf("unfinished headers: %d %v, want the connection closed", st, err)
			}
		})
	}
}

// TestHeaderTableDoc: docs/edge.md shows wire.Headers as it is.
func TestHeaderTableDoc(t *testing.T) {
	t.Parallel()
	const begin, end = "<!-- header table: edgeconf.HeaderTable -->\n", "<!-- end of header table -->"
	b, err := os.ReadFile("../../docs/edge.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("docs/edge.md has no %q … %q section", begin, end)
	}
	if got, want := doc[i+len(begin):j], edgeconf.HeaderTable(); got != want {
		t.Errorf("docs/edge.md's header table differs from wire.Headers; want:\n%s", want)
	}
}

// TestOperatorPaths: the edge's pattern of the operators' routes matches
// every path of usher's API on which only operators have a method, and no
// path a visitor uses.
func TestOperatorPaths(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(edgeconf.OperatorPaths)
	visitors := map[string]bool{}
	routes := httpapi.Routes(httpapi.Config{Registry: prometheus.NewRegistry(), Sale: new(sale.Service)})
	for _, r := range routes {
		if r.Audience == httpapi.Visitors {
			_, path, _ := strings.Cut(r.Pattern, " ")
			visitors[path] = true
		}
	}
	fill := strings.NewReplacer("{room}", "sale", "{id}", "7", "{hold}", "h1")
	for _, r := range routes {
		_, path, _ := strings.Cut(r.Pattern, " ")
		p := "/_usher" + fill.Replace(path)
		if want := !visitors[path]; re.MatchString(p) != want {
			t.Errorf("%s (%s): matched %v, want %v", p, r.Pattern, !want, want)
		}
	}
	for _, p := range []string{"/_usher/console/", "/_usher/console/session", "/_usher/auth/check", "/_usher/worker.js"} {
		if want := strings.HasPrefix(p, "/_usher/console/"); re.MatchString(p) != want {
			t.Errorf("%s: matched %v, want %v", p, !want, want)
		}
	}
}
