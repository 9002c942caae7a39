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
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"usher/internal/edgeconf"
	"usher/internal/testenv"
)

// edgeOrigin is an origin that records what it is asked: /done answers
// Usher-Release: 1, and an Upgrade request on /ws or /static/ws is answered
// 101 and echoes one line (a tunnel).
type edgeOrigin struct {
	*httptest.Server
	mu   sync.Mutex
	seen []*http.Request
}

func newEdgeOrigin(t *testing.T) *edgeOrigin {
	o := &edgeOrigin{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.seen = append(o.seen, r)
		o.mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/ws") && r.Header.Get("Upgrade") != "" {
			testenv.EchoUpgrade(w, r)
			return
		}
		if r.URL.Path == "/done" {
			w.Header().Set("Usher-Release", "1")
		}
		fmt.Fprintf(w, "origin %s", r.URL.RequestURI())
	}))
	t.Cleanup(o.Close)
	return o
}

// since returns the requests the origin got after the first n.
func (o *edgeOrigin) since(n int) []*http.Request {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*http.Request(nil), o.seen[n:]...)
}

func (o *edgeOrigin) count() int { o.mu.Lock(); defer o.mu.Unlock(); return len(o.seen) }

// freeUDP returns a loopback UDP address nobody listens on.
func freeUDP(t *testing.T) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return pc.LocalAddr().String()
}

// rawEdge sends one request as written (lines joined by CRLF) and returns
// the answer's status and, on a 101, what the tunnel echoes to a line.
func rawEdge(t *testing.T, base string, lines ...string) (status int, header http.Header, echo string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, strings.Join(lines, "\r\n")+"\r\n\r\n")
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: %v", lines[0], err)
	}
	if res.StatusCode == http.StatusSwitchingProtocols {
		io.WriteString(c, "ping\n")
		b, _ := io.ReadAll(br)
		return res.StatusCode, res.Header, string(b)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, res.Header, ""
}

// TestAuthBehindEdges runs usher auth behind real nginx and Caddy, each
// configured by `usher auth --print`, in front of a recording origin, and
// walks what usher proxy's tests walk: admission, the waiting page and its
// JSON, open paths, the bypass spellings, upgrades, forged headers and the
// origin's release.
func TestAuthBehindEdges(t *testing.T) {
	t.Parallel()
	for _, edge := range []string{"nginx", "caddy"} {
		t.Run(edge, func(t *testing.T) {
			t.Parallel()
			if edge == "nginx" {
				testenv.NginxBin(t)
			} else {
				testenv.CaddyBin(t)
			}
			testAuthBehind(t, edge)
		})
	}
}

func testAuthBehind(t *testing.T, edge string) {
	origin := newEdgeOrigin(t)
	release := freeUDP(t)
	usher := startCommand(t, "auth", "/_usher/healthz", nil, "--addr", "127.0.0.1:0", "--data-dir", testenv.DataDir(t),
		"--admin-key", proxyAdminKey, "--insecure-cookies", "--open", "/static/", "--release-listen", release)
	var conf strings.Builder
	if err := run(context.Background(), []string{"auth", "--print", edge, "--origin", origin.URL, "--listen", testenv.ClosedAddr(t),
		"--usher", usher, "--edge-dir", t.TempDir(), "--release-listen", release, "--insecure-cookies", "--open", "/static/"},
		func(string) string { return "" }, &conf, io.Discard); err != nil {
		t.Fatalf("usher auth --print %s: %v", edge, err)
	}
	var base string
	if edge == "nginx" {
		base = testenv.Nginx(t, conf.String())
	} else {
		base = testenv.Caddy(t, conf.String())
	}
	aliasAdmin(t, base, usher)
	c := client{t, base}
	if st, _, body := c.admin().do("PUT", "/api/v1/rooms/sale", proxyAdminKey, `{"max_active":1,"admit_rate":20,"interval_ms":50}`); st != 200 && st != 201 {
		t.Fatalf("room through the edge: %d %v", st, body)
	}

	a, b := newBrowser(t), newBrowser(t)
	n := origin.count()
	if st, body := get(t, a, base+"/"); st != 200 || body != "origin /" {
		t.Fatalf("first visitor: %d %q, want the origin", st, body)
	}
	if got := origin.since(n); len(got) != 1 || got[0].Header.Get("Usher-Visitor") == "" || got[0].Header.Get("Usher-Room") != "sale" {
		t.Errorf("the origin got %d requests, the last with Usher-Visitor %q Usher-Room %q; want one, naming the visitor in sale",
			len(got), got[len(got)-1].Header.Get("Usher-Visitor"), got[len(got)-1].Header.Get("Usher-Room"))
	}
	st, body := get(t, b, base+"/shop")
	if st != http.StatusTooManyRequests || !strings.Contains(body, `id="position">1<`) {
		t.Fatalf("second visitor: %d, want the waiting page at position 1:\n%s", st, body)
	}
	req, _ := http.NewRequest("GET", base+"/shop", nil)
	req.Header.Set("Accept", "application/json")
	res, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var entry struct {
		State    string `json:"state"`
		Position int    `json:"position"`
	}
	json.NewDecoder(res.Body).Decode(&entry)
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" || entry.State != "waiting" || entry.Position != 1 {
		t.Errorf("JSON poll: %d Retry-After %q %+v, want 429 waiting at 1 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"), entry)
	}
	if st, body := get(t, http.DefaultClient, base+"/static/app.js"); st != 200 || body != "origin /static/app.js" {
		t.Errorf("open path: %d %q", st, body)
	}

	// Without a pass, no spelling of a gated path reaches the origin.
	n = origin.count()
	for _, p := range []string{"/%73hop", "/SHOP", "/%C5%BFhop/x", "/%EF%BD%93hop/x", "/static/../shop", "/static/%2e%2e/shop",
		"/static%2f..%2fshop", "/static/..%2fshop", "/static/%2e%2e%2fshop", "//shop", "/static/./../shop", "/shop;/x", "/static/..;/shop"} {
		st, _, _ := rawEdge(t, base, "GET "+p+" HTTP/1.1", "Host: 127.0.0.1", "Connection: close")
		if st < 300 {
			t.Errorf("GET %s without a pass: %d", p, st)
		}
	}
	for _, p := range []string{"/shop", "/static/x"} {
		st, _, _ := rawEdge(t, base, "GET "+p+" HTTP/1.1", "Host: 127.0.0.1", "Connection: close",
			"X-Original-URI: /static/", "X-Forwarded-Uri: /static/", "X-Original-URL: /shop", "Usher-Visitor: forged", "Usher-Room: forged")
		if p == "/shop" && st < 300 {
			t.Errorf("GET /shop with forged X-Original-URI: %d", st)
		}
	}
	for _, r := range origin.since(n) {
		if !strings.HasPrefix(r.URL.Path, "/static/") || strings.Contains(r.RequestURI, "..") || strings.Contains(strings.ToLower(r.RequestURI), "%2") {
			t.Errorf("the origin served %q without a pass", r.RequestURI)
		}
		for _, h := range []string{"Usher-Visitor", "Usher-Room", "X-Original-URI", "X-Forwarded-Uri", "X-Original-URL"} {
			if v := r.Header.Get(h); v != "" {
				t.Errorf("the origin got the client's %s: %q", h, v)
			}
		}
	}

	// Upgrades: h2c never reaches the origin; a websocket needs the pass.
	n = origin.count()
	st, _, echo := rawEdge(t, base, "GET /static/ws HTTP/1.1", "Host: 127.0.0.1", "Connection: Upgrade, HTTP2-Settings",
		"Upgrade: h2c", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA")
	if st == http.StatusSwitchingProtocols || echo != "" {
		t.Errorf("h2c upgrade on an open path: %d, tunnel echoed %q", st, echo)
	}
	if st, _, echo := rawEdge(t, base, "GET /ws HTTP/1.1", "Host: 127.0.0.1", "Connection: Upgrade", "Upgrade: websocket",
		"Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="); st == http.StatusSwitchingProtocols || echo != "" {
		t.Errorf("websocket on a gated path without a pass: %d, tunnel echoed %q", st, echo)
	}
	u, _ := url.Parse(base)
	var cookie string
	for _, ck := range a.Jar.Cookies(u) {
		cookie += ck.Name + "=" + ck.Value + "; "
	}
	if st, _, echo := rawEdge(t, base, "GET /ws HTTP/1.1", "Host: 127.0.0.1", "Connection: Upgrade", "Upgrade: websocket",
		"Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Cookie: "+cookie); st != http.StatusSwitchingProtocols || echo != "echo:ping\n" {
		t.Errorf("websocket on a gated path with the pass: %d, tunnel echoed %q; want 101 and the echo", st, echo)
	}
	for _, r := range origin.since(n) {
		if up := r.Header.Get("Upgrade"); up != "" && up != "websocket" || r.Header.Get("HTTP2-Settings") != "" {
			t.Errorf("the origin got %s with Upgrade %q HTTP2-Settings %q", r.RequestURI, up, r.Header.Get("HTTP2-Settings"))
		}
	}

	// The origin ends the first visitor's slot; the second gets in.
	res, err = a.Get(base + "/done")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Usher-Release") != "" {
		t.Errorf("/done: %d, Usher-Release %q reached the client", res.StatusCode, res.Header.Get("Usher-Release"))
	}
	waitFor(t, "the second visitor admitted after the release", func() bool {
		st, body := get(t, b, base+"/shop")
		return st == 200 && body == "origin /shop"
	})
	if st, _ := get(t, a, base+"/"); st != http.StatusTooManyRequests {
		t.Errorf("released visitor: %d, want 429 (the slot is taken)", st)
	}

	// The pass slides through the edge: with active_ttl raised from 5 to
	// 60 minutes, the second visitor's next request uses more than half of
	// its pass's life, so the edge hands on a renewed pass cookie, which
	// then passes in its turn.
	if st, _, body := c.admin().do("PUT", "/api/v1/rooms/sale", proxyAdminKey, `{"active_ttl_seconds":3600}`); st != 200 {
		t.Fatalf("raising active_ttl: %d %v", st, body)
	}
	old := passCookie(b, u)
	res, err = b.Get(base + "/shop")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var renewed *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == edgeconf.PassCookie {
			renewed = ck
		}
	}
	switch {
	case res.StatusCode != 200:
		t.Errorf("admitted visitor after active_ttl was raised: %d", res.StatusCode)
	case renewed == nil || renewed.Value == old || res.Header.Get("Usher-Pass") != renewed.Value:
		t.Errorf("no renewed pass through %s: Set-Cookie %v, Usher-Pass %q", edge, res.Header["Set-Cookie"], res.Header.Get("Usher-Pass"))
	case time.Until(renewed.Expires) < 30*time.Minute:
		t.Errorf("renewed pass cookie expires %v, want about an hour from now", renewed.Expires)
	}
	if passCookie(b, u) == old {
		t.Error("the client kept its old pass")
	}
	if st, body := get(t, b, base+"/shop"); st != 200 || body != "origin /shop" {
		t.Errorf("with the renewed pass: %d %q", st, body)
	}
}

// passCookie returns the pass cookie c holds for u.
func passCookie(c *http.Client, u *url.URL) string {
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == edgeconf.PassCookie {
			return ck.Value
		}
	}
	return ""
}
