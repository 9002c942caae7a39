package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"usher/internal/pow"
	"usher/internal/testenv"
	"usher/internal/wire"
)

// seenRequest is what a recording server received.
type seenRequest struct {
	Method, URI string
	Header      http.Header
	Body        int64
}

// recording keeps what a server received.
type recording struct {
	mu   sync.Mutex
	seen []seenRequest
}

func (rc *recording) add(r *http.Request, body int64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.seen = append(rc.seen, seenRequest{r.Method, r.RequestURI, r.Header.Clone(), body})
}

func (rc *recording) all() []seenRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]seenRequest(nil), rc.seen...)
}

// find returns the last request whose target (or, at usher, the original
// target it names) starts with prefix.
func (rc *recording) find(prefix string) (seenRequest, bool) {
	all := rc.all()
	for i := len(all) - 1; i >= 0; i-- {
		r := all[i]
		target := r.URI
		for _, h := range []string{"X-Original-URI", "X-Forwarded-Uri"} {
			if v := r.Header.Get(h); v != "" {
				target = v
			}
		}
		if strings.HasPrefix(target, prefix) {
			return r, true
		}
	}
	return seenRequest{}, false
}

// guardOrigin is the origin of TestEdgeGuards: it reads and records every
// request; a path ending in /release-true answers Usher-Release: true, one
// under /cache/ answers Cache-Control: public, max-age=600.
func guardOrigin(t *testing.T) (*httptest.Server, *recording) {
	rc := &recording{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		rc.add(r, n)
		if strings.HasSuffix(r.URL.Path, "/release-true") {
			w.Header().Set(wire.ReleaseHeader, "true")
		}
		if strings.HasPrefix(r.URL.Path, "/cache/") {
			w.Header().Set("Cache-Control", "public, max-age=600")
		}
		fmt.Fprintf(w, "origin %s %s %d", r.Method, r.URL.RequestURI(), n)
	}))
	t.Cleanup(srv.Close)
	return srv, rc
}

// tapUsher is a reverse proxy in front of usher auth that records what the
// front proxy asks it, headers as sent.
func tapUsher(t *testing.T, usher string) (string, *recording) {
	rc := &recording{}
	target, _ := url.Parse(usher)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
				if v, ok := pr.In.Header[h]; ok {
					pr.Out.Header[h] = v
				}
			}
		},
		FlushInterval: -1,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.add(r, r.ContentLength)
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, rc
}

const guardSecret = "edge-guard-bypass-secret-0123456789abcdef"

// startGuarded runs usher proxy, or usher auth behind nginx or Caddy as
// `usher auth --print` configures them (usher behind a tap), in front of
// origin, and returns the edge's URL and the tap (nil for the proxy).
// Rooms: sale (everything but what follows), /static/ open, /full/ (full),
// /pow/ (pow), /one/ (one). Usher-Bypass: guardSecret passes.
func startGuarded(t *testing.T, edge, origin string) (string, *recording) {
	t.Helper()
	secrets := filepath.Join(t.TempDir(), "bypass")
	if err := os.WriteFile(secrets, []byte("probe "+guardSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--addr", "127.0.0.1:0", "--data-dir", testenv.DataDir(t), "--admin-key", proxyAdminKey,
		"--insecure-cookies", "--open", "/static/", "--route", "/full/=full", "--route", "/pow/=pow", "--route", "/one/=one",
		"--bypass-secrets", secrets}
	var base string
	var tap *recording
	switch edge {
	case "proxy":
		base = startProxy(t, nil, append(args, "--origin", origin)...)
	default:
		if edge == "nginx" {
			testenv.NginxBin(t)
		} else {
			testenv.CaddyBin(t)
		}
		release := freeUDP(t)
		usher := startCommand(t, "auth", "/_usher/healthz", nil, append(args, "--release-listen", release)...)
		var tapURL string
		tapURL, tap = tapUsher(t, usher)
		var conf strings.Builder
		if err := run(context.Background(), []string{"auth", "--print", edge, "--origin", origin, "--listen", testenv.ClosedAddr(t),
			"--usher", tapURL, "--edge-dir", t.TempDir(), "--release-listen", release, "--insecure-cookies", "--open", "/static/"},
			func(string) string { return "" }, &conf, io.Discard); err != nil {
			t.Fatalf("usher auth --print %s: %v", edge, err)
		}
		if edge == "nginx" {
			base = testenv.Nginx(t, conf.String())
		} else {
			base = testenv.Caddy(t, conf.String())
		}
		aliasAdmin(t, base, usher)
	}
	c := client{t, base}
	for room, settings := range map[string]string{
		"sale": `{"max_active":1000,"admit_rate":100,"interval_ms":50}`,
		"full": `{"state":"paused"}`,
		"pow":  `{"max_active":1000,"admit_rate":100,"interval_ms":50,"pow_bits":8}`,
		"one":  `{"max_active":1,"admit_rate":20,"interval_ms":50}`,
	} {
		if st, _, body := c.admin().do("PUT", "/api/v1/rooms/"+room, proxyAdminKey, settings); st != 200 && st != 201 {
			t.Fatalf("room %s through %s: %d %v", room, edge, st, body)
		}
	}
	return base, tap
}

// admittedBrowser returns a browser admitted in path's room, and its
// cookies as a Cookie header.
func admittedBrowser(t *testing.T, base, path string) (*http.Client, string) {
	t.Helper()
	b := newBrowser(t)
	waitFor(t, "a browser admitted at "+path, func() bool {
		st, _ := get(t, b, base+path)
		return st == 200
	})
	u, _ := url.Parse(base)
	var cookie []string
	for _, ck := range b.Jar.Cookies(u) {
		cookie = append(cookie, ck.Name+"="+ck.Value)
	}
	return b, strings.Join(cookie, "; ")
}

// TestEdgeGuards walks wire.Headers and the guards of issue 30 through
// each edge: usher proxy, nginx + usher auth and Caddy + usher auth, each
// as usher configures it, black-box between a client on raw sockets, a
// recording origin and (behind nginx and Caddy) a tap in front of usher.
func TestEdgeGuards(t *testing.T) {
	t.Parallel()
	for _, edge := range []string{"proxy", "nginx", "caddy"} {
		t.Run(edge, func(t *testing.T) {
			t.Parallel()
			origin, seen := guardOrigin(t)
			base, tap := startGuarded(t, edge, origin.URL)
			t.Run("HeaderTable", func(t *testing.T) { testHeaderTable(t, edge, base, seen, tap) })
			t.Run("Bypass", func(t *testing.T) { testBypass(t, base, seen) })
			t.Run("ProofOfWork", func(t *testing.T) { testProofOfWork(t, base) })
			t.Run("ReleaseTrue", func(t *testing.T) { testReleaseTrue(t, base) })
			t.Run("CredentialsNotCached", func(t *testing.T) { testNotCached(t, base) })
			t.Run("CredentialParams", func(t *testing.T) { testCredentialParams(t, base, seen) })
			t.Run("RefusedBody", func(t *testing.T) { testRefusedBody(t, base, seen) })
		})
	}
}

// testHeaderTable sends every client header of wire.Headers, with one
// value, on a gated and an open path, and checks each hop against the
// table: the origin gets none as sent; usher (behind nginx and Caddy) gets
// exactly the Passed ones; the client gets none of the Dropped answers.
func testHeaderTable(t *testing.T, edge, base string, origin, tap *recording) {
	const v = "198.51.100.7"
	samples := map[string][]string{"Usher-*": {"Usher-Other"}, "*_*": {"X_Real_IP", "Usher_Visitor", "X_Forwarded_For"}}
	// names are the header names a client row is sent as: its own, or
	// the samples of its class.
	names := func(row wire.EdgeHeader) []string {
		if row.Pattern() {
			return samples[row.Name]
		}
		return []string{row.Name}
	}
	var lines []string
	for _, row := range wire.Headers {
		if row.From != "client" {
			continue
		}
		for _, n := range names(row) {
			lines = append(lines, n+": "+v)
		}
	}
	_, cookie := admittedBrowser(t, base, "/table/enter")
	for i, path := range []string{"/table/gated", "/static/table"} {
		target := fmt.Sprintf("%s/%d", path, i)
		st, h, _ := rawEdge(t, base, append([]string{"GET " + target + " HTTP/1.1", "Host: 127.0.0.1", "Connection: close",
			"Cookie: " + cookie}, lines...)...)
		if st != 200 {
			t.Fatalf("GET %s with every header: %d, want 200", target, st)
		}
		for _, row := range wire.Headers {
			if row.From != "client" && row.Client == wire.Dropped && h.Get(row.Name) != "" {
				t.Errorf("GET %s: the client got %s: %q", target, row.Name, h.Get(row.Name))
			}
		}
		got, ok := origin.find(target)
		if !ok {
			t.Fatalf("the origin never got %s", target)
		}
		for name, vs := range got.Header {
			if strings.Contains(strings.Join(vs, ","), v) {
				if edge == "nginx" && name == "Usher-Other" {
					continue // the table's one exception: nginx strips by name
				}
				t.Errorf("GET %s: the origin got the client's %s: %q", target, name, vs)
			}
			if strings.Contains(name, "_") {
				t.Errorf("GET %s: the origin got %s", target, name)
			}
		}
		if gated := i == 0; gated && tap != nil && (got.Header.Get(wire.VisitorHeader) == "" || got.Header.Get(wire.RoomHeader) != "sale") {
			t.Errorf("GET %s: the origin got Usher-Visitor %q Usher-Room %q, want usher's", target,
				got.Header.Get(wire.VisitorHeader), got.Header.Get(wire.RoomHeader))
		}
		if tap == nil {
			continue
		}
		check, ok := tap.find(target)
		if open := i == 1; open {
			// An open path goes straight to the origin (edgeconf.Shortcut).
			if ok {
				t.Errorf("usher was asked about the open path %s", target)
			}
			continue
		}
		if !ok {
			t.Fatalf("usher was never asked about %s", target)
		}
		for _, row := range wire.Headers {
			if row.From != "client" {
				continue
			}
			for _, n := range names(row) {
				got := strings.Join(check.Header.Values(n), ",")
				switch {
				case row.Usher == wire.Passed && got != v:
					t.Errorf("GET %s: usher got %s %q, want the client's %q", target, n, got, v)
				case row.Usher == wire.Dropped && got != "":
					t.Errorf("GET %s: usher got %s %q, want none", target, n, got)
				case row.Usher == wire.Replaced && strings.Contains(got, v):
					t.Errorf("GET %s: usher got the client's %s %q", target, n, got)
				}
			}
		}
	}
}

// testBypass: a bypass secret passes a full room behind every edge, and
// never reaches the origin.
func testBypass(t *testing.T, base string, origin *recording) {
	if st, _, _ := rawEdge(t, base, "GET /full/nobypass HTTP/1.1", "Host: 127.0.0.1", "Connection: close"); st == 200 {
		t.Fatalf("the full room let a newcomer through: %d", st)
	}
	st, _, _ := rawEdge(t, base, "GET /full/bypass HTTP/1.1", "Host: 127.0.0.1", "Connection: close", "Usher-Bypass: "+guardSecret)
	if st != 200 {
		t.Errorf("GET /full/bypass with the bypass secret: %d, want 200 (usher must get Usher-Bypass)", st)
	}
	if got, ok := origin.find("/full/bypass"); ok && got.Header.Get(wire.BypassHeader) != "" {
		t.Errorf("the origin got the bypass secret: %q", got.Header.Get(wire.BypassHeader))
	}
}

// testProofOfWork: a newcomer to a room with pow_bits gets 428 and a
// challenge, and its solution, sent in Usher-Challenge, gets it a place.
func testProofOfWork(t *testing.T, base string) {
	ask := func(solution string) (int, map[string]any) {
		req, _ := http.NewRequest("GET", base+"/pow/x", nil)
		req.Header.Set("Accept", "application/json")
		if solution != "" {
			req.Header.Set(wire.ChallengeHeader, solution)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m map[string]any
		json.NewDecoder(res.Body).Decode(&m)
		return res.StatusCode, m
	}
	st, body := ask("")
	c, _ := body["challenge"].(map[string]any)
	if st != http.StatusPreconditionRequired || c == nil {
		t.Fatalf("newcomer to a pow room: %d %v, want 428 with a challenge", st, body)
	}
	ch := pow.Challenge{Token: c["token"].(string), Bits: int(c["bits"].(float64))}
	if st, body := ask(ch.Token + ":" + pow.Solve(ch)); st == http.StatusPreconditionRequired || st == http.StatusUnauthorized {
		t.Errorf("newcomer with a solution: %d %v, want a place (usher must get Usher-Challenge)", st, body)
	}
}

// testReleaseTrue: `Usher-Release: true` ends the slot like 1, is hidden
// from the client, and its answer (which clears the pass) is not cached.
func testReleaseTrue(t *testing.T, base string) {
	a, _ := admittedBrowser(t, base, "/one/a")
	b := newBrowser(t)
	if st, _ := get(t, b, base+"/one/b"); st != http.StatusTooManyRequests {
		t.Fatalf("second visitor in a room of one: %d, want 429", st)
	}
	res, err := a.Get(base + "/one/release-true")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get(wire.ReleaseHeader) != "" {
		t.Errorf("release: %d, Usher-Release %q reached the client", res.StatusCode, res.Header.Get(wire.ReleaseHeader))
	}
	if cc := res.Header.Values("Cache-Control"); len(cc) != 1 || cc[0] != wire.CredentialCacheControl {
		t.Errorf("release answer (it clears the pass cookie): Cache-Control %q, want %q", cc, wire.CredentialCacheControl)
	}
	waitFor(t, "the second visitor admitted after Usher-Release: true", func() bool {
		st, _ := get(t, b, base+"/one/b")
		return st == 200
	})
}

// testNotCached: a cookie-less JSON request admitted at once comes back
// with usher's cookies and Cache-Control: private, no-store, though the
// origin says public.
func testNotCached(t *testing.T, base string) {
	req, _ := http.NewRequest("GET", base+"/cache/x", nil)
	req.Header.Set("Accept", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if !wire.CarriesCredentials(res.Header) {
		t.Fatalf("admitted JSON newcomer: %d without usher's cookies or a pass: %v", res.StatusCode, res.Header)
	}
	if cc := res.Header.Values("Cache-Control"); len(cc) != 1 || cc[0] != wire.CredentialCacheControl {
		t.Errorf("admitted JSON newcomer: %d Cache-Control %q, want %q", res.StatusCode, cc, wire.CredentialCacheControl)
	}
}

// testCredentialParams: usher_invite, usher_lane and usher_identity never
// reach the origin: a request that would pass with them is sent to its
// URL without them (307, method and body kept).
func testCredentialParams(t *testing.T, base string, origin *recording) {
	b, _ := admittedBrowser(t, base, "/cred/enter")
	for _, tc := range []struct{ method, target, body, want string }{
		{"GET", "/cred/x?usher_invite=abc&a=1&usher%5Flane=z&usher_identity=q&b=2", "", "origin GET /cred/x?a=1&b=2 0"},
		{"GET", "/static/cred?usher_invite=abc", "", "origin GET /static/cred 0"},
		{"POST", "/cred/p?usher_invite=abc;x=1&c=3", "hello", "origin POST /cred/p?c=3 5"},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.target, strings.NewReader(tc.body))
		if tc.body == "" {
			req.Body = nil
		}
		res, err := b.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || string(got) != tc.want {
			t.Errorf("%s %s: %d %q, want 200 %q", tc.method, tc.target, res.StatusCode, got, tc.want)
		}
	}
	for _, r := range origin.all() {
		if u, err := url.ParseRequestURI(r.URI); err == nil && strings.Contains(u.RawQuery+u.Query().Encode(), "usher_") {
			t.Errorf("the origin got %s %s", r.Method, r.URI)
		}
	}
}

// testRefusedBody: a refused visitor's upload is answered before it is
// sent, so no edge reads or stores it; an admitted one streams to the
// origin whole.
func testRefusedBody(t *testing.T, base string, origin *recording) {
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second)) // a failure ends the test, never hangs it
	const size = 8 << 20
	fmt.Fprintf(c, "POST /full/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", size)
	c.Write(make([]byte, 64<<10)) // the rest is never sent
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("a refused upload of %d bytes, 64 KiB of it sent: no answer (%v); the edge waits to read it all", size, err)
	}
	res.Body.Close()
	if res.StatusCode < 400 {
		t.Errorf("a refused upload: %d, want a refusal", res.StatusCode)
	}
	if _, ok := origin.find("/full/upload"); ok {
		t.Error("the origin got the refused upload")
	}
	b, _ := admittedBrowser(t, base, "/upload/enter")
	res, err = b.Post(base+"/upload/ok", "application/octet-stream", strings.NewReader(strings.Repeat("x", 1<<20)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if want := fmt.Sprintf("origin POST /upload/ok %d", 1<<20); res.StatusCode != 200 || string(body) != want {
		t.Errorf("an admitted upload: %d %q, want 200 %q", res.StatusCode, body, want)
	}
}

// TestEdgeUnderscoresWSGI: header names with underscores never reach a
// WSGI origin (Python's wsgiref, which reads X_Forwarded_For as
// X-Forwarded-For and joins them) through any edge.
func TestEdgeUnderscoresWSGI(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		testenv.Skip(t, "python3", "install python3")
	}
	for _, edge := range []string{"proxy", "nginx", "caddy"} {
		t.Run(edge, func(t *testing.T) {
			t.Parallel()
			origin := wsgiOrigin(t, python)
			base, _ := startGuarded(t, edge, origin)
			st, env := rawWSGI(t, base, "GET /static/env HTTP/1.1", "Host: 127.0.0.1", "Connection: close",
				"X_Forwarded_For: 6.6.6.6", "X_Real_IP: 6.6.6.6", "Usher_Visitor: victim", "X_Original_URL: /shop/secret",
				"X_Forwarded_Host: evil.example")
			if st != 200 { // an open path: no pass needed
				t.Fatalf("GET /static/env: %d", st)
			}
			for k, v := range env {
				if strings.Contains(v, "6.6.6.6") || strings.Contains(v, "victim") || strings.Contains(v, "/shop/secret") ||
					strings.Contains(v, "evil.example") {
					t.Errorf("the WSGI origin read %s=%q", k, v)
				}
			}
			if env["HTTP_X_FORWARDED_FOR"] == "" {
				t.Errorf("the WSGI origin got no X-Forwarded-For from the edge: %v", env)
			}
		})
	}
}

// wsgiOrigin runs a wsgiref server that answers each request with its
// HTTP_* environment as JSON, and returns its URL.
func wsgiOrigin(t *testing.T, python string) string {
	const script = `
import json, sys
from wsgiref.simple_server import make_server, WSGIRequestHandler
class Quiet(WSGIRequestHandler):
    def log_message(self, *a): pass
def app(environ, start):
    body = json.dumps({k: v for k, v in environ.items() if k.startswith("HTTP_")}).encode()
    start("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
srv = make_server("127.0.0.1", 0, app, handler_class=Quiet)
print(srv.server_port, flush=True)
srv.serve_forever()
`
	cmd := exec.Command(python, "-c", script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	port, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("wsgiref origin: %v", err)
	}
	return "http://127.0.0.1:" + strings.TrimSpace(port)
}

// rawWSGI sends one raw request and decodes the WSGI origin's answer.
func rawWSGI(t *testing.T, base string, lines ...string) (int, map[string]string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, strings.Join(lines, "\r\n")+"\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var env map[string]string
	json.NewDecoder(res.Body).Decode(&env)
	return res.StatusCode, env
}

// TestPrintHeaderBounds: `usher auth --print` bounds the edge's request
// headers as --max-header-bytes and --header-timeout bound usher's own.
func TestPrintHeaderBounds(t *testing.T) {
	for edge, want := range map[string][]string{
		"nginx": {"large_client_header_buffers 4 4k;", "client_header_timeout 7s;"},
		"caddy": {"max_header_size 16384", "read_header 7s"},
	} {
		var conf strings.Builder
		if err := run(context.Background(), []string{"auth", "--print", edge, "--origin", "http://127.0.0.1:9000",
			"--edge-dir", t.TempDir(), "--max-header-bytes", "16384", "--header-timeout", "7s"},
			func(string) string { return "" }, &conf, io.Discard); err != nil {
			t.Fatalf("usher auth --print %s: %v", edge, err)
		}
		for _, w := range want {
			if !strings.Contains(conf.String(), w) {
				t.Errorf("--print %s with --max-header-bytes 16384 --header-timeout 7s lacks %q", edge, w)
			}
		}
	}
}
