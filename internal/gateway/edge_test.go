package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"usher/internal/clientip"
	"usher/internal/queue"
)

// switcher is an origin on a raw socket that answers 101 to every request
// (naming the protocol the request asked for, or none) and then keeps
// reading HTTP/1.1 requests over the same connection, answering each: the
// kind of origin (an h2c server, a careless one) through which a tunnel
// would carry requests past the gate. It records every request target.
type switcher struct {
	mu   sync.Mutex
	seen []string
}

func newSwitcher(t *testing.T) (*switcher, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &switcher{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return s, "http://" + ln.Addr().String()
}

func (s *switcher) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	switched := false
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.seen = append(s.seen, req.RequestURI)
		s.mu.Unlock()
		io.Copy(io.Discard, req.Body)
		if !switched {
			switched = true
			fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", req.Header.Get("Upgrade"))
			continue
		}
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret")
	}
}

func (s *switcher) targets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// TestUpgradesDoNotTunnel: an Upgrade other than a websocket handshake
// never reaches the origin, on an open path or a gated one, so no origin
// switches protocols and serves what follows past the gate; and an origin
// that switches anyway gets no tunnel (502). The requests sent inside the
// would-be tunnel never reach the origin.
func TestUpgradesDoNotTunnel(t *testing.T) {
	sw, origin := newSwitcher(t)
	e := newEnv(t, origin, Rules{Gate: []string{"/shop/"}, Open: []string{"/static/"}})
	u, _ := url.Parse(e.url)
	for _, up := range []string{
		"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nConnection: Upgrade, HTTP2-Settings",
		"Upgrade: foo\r\nConnection: Upgrade",
		"Upgrade: websocket, h2c\r\nConnection: Upgrade",
		"Upgrade: websocket\r\nConnection: Upgrade\r\nContent-Length: 3", // a handshake has no body
	} {
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		body := ""
		if strings.Contains(up, "Content-Length: 3") {
			body = "abc"
		}
		// The request, then a request inside the tunnel it would open.
		fmt.Fprintf(conn, "GET /static/x HTTP/1.1\r\nHost: %s\r\n%s\r\n\r\n%s", u.Host, up, body)
		fmt.Fprintf(conn, "GET /shop/secret HTTP/1.1\r\nHost: %s\r\n\r\n", u.Host)
		br := bufio.NewReader(conn)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%q: %v", up, err)
		}
		if res.StatusCode == http.StatusSwitchingProtocols {
			t.Errorf("%q: 101: the proxy opened a tunnel", up)
		}
		res.Body.Close()
		if res, err := http.ReadResponse(br, nil); err == nil { // the second request, as the proxy reads it
			if res.StatusCode == http.StatusOK {
				t.Errorf("%q: the request after it was served: %d", up, res.StatusCode)
			}
			res.Body.Close()
		}
		conn.Close()
	}
	for _, target := range sw.targets() {
		if strings.HasPrefix(target, "/shop/") {
			t.Errorf("the origin received %q without a pass", target)
		}
	}
}

// TestWebSocketNeedsThePass: a websocket handshake on a gated path without
// a pass waits like any request: it reaches no origin.
func TestWebSocketNeedsThePass(t *testing.T) {
	sw, origin := newSwitcher(t)
	e := newEnv(t, origin, Rules{Gate: []string{"/shop/"}})
	e.admit("sale", "occupant", time.Time{}) // the one slot is taken: the handshake waits
	res := raw(t, e.url, "GET /shop/ws HTTP/1.1", "Upgrade: websocket", "Connection: Upgrade", "Accept: application/json")
	if res.StatusCode == http.StatusSwitchingProtocols || len(sw.targets()) != 0 {
		t.Errorf("handshake without a pass: %d, origin saw %v", res.StatusCode, sw.targets())
	}
}

// TestTunnelEndsWithItsSlot: a websocket opened on a gated path is closed
// when the slot's expiry, as the handshake renewed it, passes.
func TestTunnelEndsWithItsSlot(t *testing.T) {
	origin := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		rw.Flush()
		io.Copy(io.Discard, rw) // holds the tunnel open for as long as the proxy does
	})
	e := newEnv(t, origin, Rules{})
	s := queue.DefaultSettings()
	s.MaxActive, s.ActiveTTL, s.ClaimWindow = 1, 2*time.Second, time.Second
	if err := e.q.PutRoom(context.Background(), "sale", s); err != nil {
		t.Fatal(err)
	}
	pass := e.admit("sale", "v1", time.Time{})
	u, _ := url.Parse(e.url)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second)) // far beyond the 2s slot: a tunnel still open then fails the test
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nAuthorization: Bearer %s\r\n\r\n", u.Host, pass)
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", res, err)
	}
	_, err = br.ReadByte()
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the tunnel outlived its slot")
	}
	if err == nil {
		t.Fatal("the origin sent data; want the tunnel closed")
	}
}

// TestUpgradeKeepsBodyDeadline: a request with an Upgrade header and a
// body it never sends is cut at the body timeout like any other.
func TestUpgradeKeepsBodyDeadline(t *testing.T) {
	e := newEnv(t, newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}), Rules{Open: []string{"/static/"}}, func(c *Config) { c.BodyTimeout = 200 * time.Millisecond })
	u, _ := url.Parse(e.url)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(15 * time.Second)) // a connection still held then fails the test
	fmt.Fprintf(conn, "POST /static/x HTTP/1.1\r\nHost: %s\r\nUpgrade: x\r\nConnection: Upgrade\r\nContent-Length: 100000\r\n\r\n", u.Host)
	_, err = io.Copy(io.Discard, conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the connection was held past the body timeout")
	}
}

// headerEcho is an origin that answers the request headers it received.
func headerEcho(w http.ResponseWriter, r *http.Request) {
	for name, vs := range r.Header {
		fmt.Fprintf(w, "%s: %s\n", strings.ToLower(name), strings.Join(vs, ","))
	}
	fmt.Fprintf(w, "host: %s\n", r.Host)
}

// TestHeaderHygiene: the origin is told who the client is and which host
// it asked for only by what the proxy knows; nothing a client sends about
// itself, its URL or usher reaches the origin.
func TestHeaderHygiene(t *testing.T) {
	forged := []string{
		"X-Real-IP: 6.6.6.6", "True-Client-IP: 6.6.6.6", "X-Client-IP: 6.6.6.6", "CF-Connecting-IP: 6.6.6.6",
		"Fastly-Client-IP: 6.6.6.6", "Forwarded: for=6.6.6.6;host=evil.example", "X-Forwarded-For: 6.6.6.6",
		"X-Forwarded-Host: evil.example", "X-Forwarded-Proto: https", "X-Forwarded-Prefix: /evil",
		"X-Forwarded-Port: 443", "X-Forwarded-Scheme: https", "X-Forwarded-Server: evil.example",
		"Usher-Pass: forged", "Usher-Release: 1", "usher-visitor: forged",
	}
	send := func(t *testing.T, e *env, host string, extra ...string) (int, string) {
		t.Helper()
		u, _ := url.Parse(e.url)
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "GET /static/x HTTP/1.1\r\nHost: %s\r\n%s\r\nConnection: close\r\n\r\n", host, strings.Join(append(forged, extra...), "\r\n"))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		for name := range res.Header {
			if strings.HasPrefix(strings.ToLower(name), "usher-") {
				t.Errorf("the answer carries %s", name)
			}
		}
		return res.StatusCode, string(b)
	}
	want := func(t *testing.T, seen string, lines ...string) {
		t.Helper()
		for _, l := range lines {
			if !strings.Contains(seen, l+"\n") {
				t.Errorf("origin saw no %q in:\n%s", l, seen)
			}
		}
		for _, l := range strings.Split(seen, "\n") {
			if strings.Contains(l, "6.6.6.6") || strings.Contains(l, "evil") || strings.HasPrefix(l, "usher-") ||
				strings.HasPrefix(l, "x-forwarded-prefix") || strings.HasPrefix(l, "x-forwarded-port") ||
				strings.HasPrefix(l, "x-forwarded-s") || l == "x-forwarded-proto: https" ||
				strings.HasPrefix(l, "true-client") || strings.HasPrefix(l, "cf-") || strings.HasPrefix(l, "forwarded") {
				t.Errorf("origin saw %q", l)
			}
		}
	}
	rules := Rules{Open: []string{"/static/"}}

	t.Run("any host", func(t *testing.T) {
		e := newEnv(t, newOrigin(t, headerEcho), rules)
		status, seen := send(t, e, "evil.example")
		if status != 200 {
			t.Fatalf("%d %s", status, seen)
		}
		want(t, seen, "x-real-ip: 127.0.0.1", "x-forwarded-for: 127.0.0.1", "x-forwarded-proto: http")
		if strings.Contains(seen, "x-forwarded-host") {
			t.Errorf("without --public-host the origin was given a host: %s", seen)
		}
	})
	t.Run("public hosts", func(t *testing.T) {
		e := newEnv(t, newOrigin(t, headerEcho), rules, func(c *Config) { c.PublicHosts = []string{"Tickets.Example"} })
		if status, seen := send(t, e, "evil.example"); status != http.StatusMisdirectedRequest {
			t.Errorf("foreign host: %d %s, want 421", status, seen)
		}
		status, seen := send(t, e, "tickets.example:8080")
		if status != 200 {
			t.Fatalf("%d %s", status, seen)
		}
		want(t, seen, "x-forwarded-host: tickets.example:8080", "x-real-ip: 127.0.0.1")
	})
	t.Run("trusted proxy", func(t *testing.T) {
		trusted, _ := clientip.ParseTrusted("127.0.0.1")
		e := newEnv(t, newOrigin(t, headerEcho), rules, func(c *Config) { c.Trusted = trusted })
		_, seen := send(t, e, "x", "X-Forwarded-For: 203.0.113.9")
		// The forged 6.6.6.6 came first (left), the trusted hop appended 203.0.113.9.
		if !strings.Contains(seen, "x-real-ip: 203.0.113.9\n") || !strings.Contains(seen, "x-forwarded-for: 203.0.113.9\n") {
			t.Errorf("origin saw:\n%s", seen)
		}
	})
}

// TestReleaseHeaderFromClientIgnored: Usher-Release sent by a client ends
// nobody's slot; only the origin's answer can.
func TestReleaseHeaderFromClientIgnored(t *testing.T) {
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	pass := e.admit("sale", "v1", time.Time{})
	res := do(t, http.DefaultClient, "GET", e.url+"/shop", map[string]string{"Authorization": "Bearer " + pass, "Usher-Release": "1"})
	if res.status != 200 {
		t.Fatalf("%d %s", res.status, res.body)
	}
	if res := do(t, http.DefaultClient, "GET", e.url+"/shop", map[string]string{"Authorization": "Bearer " + pass}); res.status != 200 {
		t.Errorf("after a client's Usher-Release: %d, want the slot kept", res.status)
	}
}
