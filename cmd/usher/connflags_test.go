package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"usher/internal/testenv"
)

// guard bounds a failure (a connection the test waits on), measuring nothing.
const guard = time.Minute

// headerLines is at most n bytes of whole, small header lines, the
// costliest kind to hold (one header kept per line).
func headerLines(n int) string {
	var b strings.Builder
	for i := 0; ; i++ {
		line := fmt.Sprintf("X-Pad-%d: a\r\n", i)
		if b.Len()+len(line) > n {
			return b.String()
		}
		b.WriteString(line)
	}
}

// visitorServers starts each command whose server faces visitors, with
// args added; it returns their addresses and a path each serves, by name.
func visitorServers(t *testing.T, args ...string) map[string][2]string {
	t.Helper()
	origin := newEdgeOrigin(t)
	common := append([]string{"--addr", "127.0.0.1:0", "--admin-key", proxyAdminKey}, args...)
	servers := map[string][2]string{}
	for _, s := range []struct{ cmd, health string }{
		{"serve", "/healthz"}, {"proxy", "/_usher/healthz"}, {"auth", "/_usher/healthz"},
	} {
		more := []string{"--data-dir", testenv.DataDir(t)}
		if s.cmd == "proxy" {
			more = append(more, "--origin", origin.URL)
		}
		if s.cmd == "serve" {
			more = append(more, "--collect=false", "--events=false")
		}
		base := startCommand(t, s.cmd, s.health, nil, append(common, more...)...)
		servers[s.cmd] = [2]string{strings.TrimPrefix(base, "http://"), s.health}
	}
	return servers
}

// TestHeaderBound: every server that faces visitors (serve, proxy, auth)
// answers 431 to a request whose header lines pass --max-header-bytes
// (default 32 KiB, and Go's 4 KiB of slack), as soon as it has read that
// far: it never holds a megabyte of them waiting for the blank line. A
// request just under the bound is served. Before the bound (Go's 1 MB),
// the unfinished requests were held until the header timeout and closed
// without an answer.
func TestHeaderBound(t *testing.T) {
	t.Parallel()
	for name, s := range visitorServers(t) {
		addr, path := s[0], s[1]
		t.Run(name, func(t *testing.T) {
			const n = 4
			var ps []*testenv.Peer
			for range n {
				p := testenv.DialFrom(t, "127.0.0.2", addr)
				p.SendHeaders(path, headerLines(1<<20), false)
				ps = append(ps, p)
			}
			for i, p := range ps {
				if st, err := p.Status(); st != http.StatusRequestHeaderFieldsTooLarge {
					t.Errorf("unfinished request %d with 1 MB of header lines: %d %v, want 431", i, st, err)
				}
			}
			p := testenv.DialFrom(t, "127.0.0.2", addr)
			p.SendHeaders(path, headerLines(defaultMaxHeaderBytes-1024), true)
			if st, err := p.Status(); st != http.StatusOK {
				t.Errorf("request with %d bytes of header lines: %d %v, want 200", defaultMaxHeaderBytes-1024, st, err)
			}
		})
	}
}

// TestHeaderBoundFlag: --max-header-bytes sets the bound.
func TestHeaderBoundFlag(t *testing.T) {
	t.Parallel()
	origin := newEdgeOrigin(t)
	base := startProxy(t, nil, "--addr", "127.0.0.1:0", "--origin", origin.URL, "--data-dir", testenv.DataDir(t),
		"--admin-key", proxyAdminKey, "--max-header-bytes", "8192")
	addr := strings.TrimPrefix(base, "http://")
	p := testenv.DialFrom(t, "127.0.0.2", addr)
	p.SendHeaders("/_usher/healthz", headerLines(8192+8192), true)
	if st, err := p.Status(); st != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("16 KiB of headers under --max-header-bytes 8192: %d %v, want 431", st, err)
	}
	p = testenv.DialFrom(t, "127.0.0.2", addr)
	p.SendHeaders("/_usher/healthz", headerLines(6000), true)
	if st, err := p.Status(); st != http.StatusOK {
		t.Errorf("6,000 bytes of headers under --max-header-bytes 8192: %d %v, want 200", st, err)
	}
}

// TestHeaderBoundPerClient: one client opening more unfinished requests
// with big header lines than --max-conns-per-client gets a 503 for each
// connection past the bound, and a 431 on each one admitted; none is held
// waiting for the rest of its headers.
func TestHeaderBoundPerClient(t *testing.T) {
	t.Parallel()
	origin := newEdgeOrigin(t)
	base := startProxy(t, nil, "--addr", "127.0.0.1:0", "--origin", origin.URL, "--data-dir", testenv.DataDir(t),
		"--admin-key", proxyAdminKey, "--max-conns-per-client", "4")
	addr := strings.TrimPrefix(base, "http://")
	var ps []*testenv.Peer
	for range 8 { // all open before any sends: the first 4 are fresh, not stalled
		ps = append(ps, testenv.DialFrom(t, "127.0.0.2", addr))
	}
	for _, p := range ps {
		p.SendHeaders("/_usher/healthz", headerLines(1<<20), false)
	}
	got := map[int]int{}
	for _, p := range ps {
		st, _ := p.Status()
		got[st]++
	}
	// On a machine slow enough that 2 s pass between the first accept and
	// a later one, the limiter sheds one of the first four as stalled
	// (answer 0: closed) rather than refuse the newcomer: still 4 past
	// the bound refused, and nothing left waiting.
	if got[503] != 4 || got[431]+got[0] != 4 || got[431] == 0 {
		t.Errorf("answers to 8 unfinished requests with 1 MB of header lines from one client: %v, want 4 × 503 and 4 × 431 (or closed as stalled)", got)
	}
}

// TestStalledConnsShedForNewcomer: through usher proxy, a client holding
// --max-conns-per-client connections that never finish their headers
// (a slow-headers attack behind one address) does not lock the address's
// other users out: once the oldest has stalled (2 s without a request),
// a newcomer closes it and is served; the others are kept.
func TestStalledConnsShedForNewcomer(t *testing.T) {
	t.Parallel()
	origin := newEdgeOrigin(t)
	base := startProxy(t, nil, "--addr", "127.0.0.1:0", "--origin", origin.URL, "--data-dir", testenv.DataDir(t),
		"--admin-key", proxyAdminKey, "--max-conns-per-client", "4", "--header-timeout", "2m")
	addr := strings.TrimPrefix(base, "http://")
	var held []*testenv.Peer
	for range 4 {
		p := testenv.DialFrom(t, "127.0.0.2", addr)
		p.SendHeaders("/_usher/healthz", headerLines(16<<10), false)
		held = append(held, p)
	}
	refusals := 0
	testenv.Eventually(t, guard, "a newcomer served", func() bool {
		p := testenv.DialFrom(t, "127.0.0.2", addr)
		p.Send(t, "/_usher/healthz")
		st, _ := p.Status()
		if st == http.StatusServiceUnavailable {
			refusals++
			return false
		}
		if st != http.StatusOK {
			t.Fatalf("newcomer: %d, want 200 or 503", st)
		}
		return true
	})
	t.Logf("%d newcomers refused before the oldest stalled", refusals)
	if !held[0].ClosedByServer() {
		t.Error("the oldest stalled connection is still open")
	}
	for i, p := range held[1:] {
		io.WriteString(p, "\r\n")
		if st, err := p.Status(); st != http.StatusOK {
			t.Errorf("stalled connection %d, kept, then finished: %d %v, want 200", i+1, st, err)
		}
	}
}

// TestProxyIdleHoldersDoNotBlock: through `usher proxy --max-conns 4`, a
// client holding 4 idle connections does not keep another from the proxy.
func TestProxyIdleHoldersDoNotBlock(t *testing.T) {
	t.Parallel()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "origin") }))
	defer origin.Close()
	base := startProxy(t, nil, "--addr", "127.0.0.1:0", "--origin", origin.URL, "--data-dir", testenv.DataDir(t),
		"--admin-key", proxyAdminKey, "--max-conns", "4", "--max-conns-per-client", "100")
	addr := strings.TrimPrefix(base, "http://")
	for range 4 {
		testenv.DialFrom(t, "127.0.0.2", addr).Get(t, "/_usher/healthz")
	}
	honest := &http.Client{Timeout: guard, Transport: &http.Transport{DisableKeepAlives: true}}
	for range 3 {
		if st, _ := get(t, honest, base+"/_usher/healthz"); st != 200 {
			t.Fatalf("honest client: %d, want 200", st)
		}
	}
}
