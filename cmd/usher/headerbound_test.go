package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"usher/internal/testenv"
)

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

// sendHeaders starts a request and writes header bytes on its own
// goroutine, without the blank line that ends them (unless end): the
// server may stop reading, and answer, at any point.
func (p *peer) sendHeaders(path, headers string, end bool) {
	go func() {
		req := "GET " + path + " HTTP/1.1\r\nHost: usher.test\r\n" + headers
		if end {
			req += "\r\n"
		}
		io.WriteString(p, req)
	}()
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
			var ps []*peer
			for range n {
				p := dialFrom(t, "127.0.0.2", addr)
				p.sendHeaders(path, headerLines(1<<20), false)
				ps = append(ps, p)
			}
			for i, p := range ps {
				if st, err := p.status(); st != http.StatusRequestHeaderFieldsTooLarge {
					t.Errorf("unfinished request %d with 1 MB of header lines: %d %v, want 431", i, st, err)
				}
			}
			p := dialFrom(t, "127.0.0.2", addr)
			p.sendHeaders(path, headerLines(defaultMaxHeaderBytes-1024), true)
			if st, err := p.status(); st != http.StatusOK {
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
	p := dialFrom(t, "127.0.0.2", addr)
	p.sendHeaders("/_usher/healthz", headerLines(8192+8192), true)
	if st, err := p.status(); st != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("16 KiB of headers under --max-header-bytes 8192: %d %v, want 431", st, err)
	}
	p = dialFrom(t, "127.0.0.2", addr)
	p.sendHeaders("/_usher/healthz", headerLines(6000), true)
	if st, err := p.status(); st != http.StatusOK {
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
	var ps []*peer
	for range 8 { // all open before any sends: the first 4 are fresh, not stalled
		ps = append(ps, dialFrom(t, "127.0.0.2", addr))
	}
	for _, p := range ps {
		p.sendHeaders("/_usher/healthz", headerLines(1<<20), false)
	}
	got := map[int]int{}
	for _, p := range ps {
		st, _ := p.status()
		got[st]++
	}
	if want := map[int]int{431: 4, 503: 4}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("answers to 8 unfinished requests with 1 MB of header lines from one client: %v, want %v", got, want)
	}
}
