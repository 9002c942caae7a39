package conncap

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"usher/internal/clientip"
	"usher/internal/testenv"
)

// guard bounds a failure (a connection the test waits on), measuring nothing.
const guard = time.Minute

// limitedServer serves, on a Listener, "/" with "ok" and "/hold/NAME"
// once release(NAME) is called; entered counts the /hold requests begun.
type limitedServer struct {
	l       *Listener
	addr    string
	entered atomic.Int32
	mu      sync.Mutex
	gates   map[string]chan struct{}
}

func (s *limitedServer) gate(name string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gates[name] == nil {
		s.gates[name] = make(chan struct{})
	}
	return s.gates[name]
}

func (s *limitedServer) release(name string) { close(s.gate(name)) }

func startLimited(t *testing.T, network, addr string, total, perClient int, trusted clientip.Trusted) *limitedServer {
	t.Helper()
	raw, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &limitedServer{l: New(raw, total, perClient, trusted), addr: raw.Addr().String(), gates: map[string]chan struct{}{}}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if name, ok := strings.CutPrefix(r.URL.Path, "/hold/"); ok {
				s.entered.Add(1)
				select {
				case <-s.gate(name):
				case <-r.Context().Done():
				}
			}
			io.WriteString(w, "ok")
		}),
		ReadHeaderTimeout: guard,
		IdleTimeout:       10 * guard,
		ConnState:         s.l.ConnState,
	}
	go srv.Serve(s.l)
	t.Cleanup(func() { srv.Close() })
	return s
}

// counts returns the limiter's open and idle connections.
func (s *limitedServer) counts() (open, idle int) {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	return s.l.open, s.l.idle.Len()
}

func (s *limitedServer) waitIdle(t *testing.T, n int) {
	t.Helper()
	testenv.Eventually(t, guard, fmt.Sprintf("%d idle connections", n), func() bool {
		_, idle := s.counts()
		return idle == n
	})
}

func (s *limitedServer) waitEntered(t *testing.T, n int32) {
	t.Helper()
	testenv.Eventually(t, guard, fmt.Sprintf("%d held requests", n), func() bool { return s.entered.Load() == n })
}

// TestConnCapIdleHolderDoesNotBlock: one client holding --max-conns idle
// keep-alive connections (each after one GET) no longer blocks a client
// from another address: the newcomer closes the longest-idle connection.
func TestConnCapIdleHolderDoesNotBlock(t *testing.T) {
	const n = 4
	s := startLimited(t, "tcp", "127.0.0.1:0", n, 100, nil)
	var held []*testenv.Peer
	for i := range n {
		p := testenv.DialFrom(t, "127.0.0.2", s.addr)
		p.Get(t, "/")
		held = append(held, p)
		// The client reads the answer before the server marks the
		// connection idle: wait, so that held[0] is the longest idle.
		s.waitIdle(t, i+1)
	}
	testenv.DialFrom(t, "127.0.0.1", s.addr).Get(t, "/")
	if !held[0].ClosedByServer() {
		t.Error("the longest-idle connection is still open")
	}
	held[n-1].Get(t, "/") // the newest is kept
	if open, _ := s.counts(); open != n {
		t.Errorf("%d open, want %d", open, n)
	}
}

// TestConnCapWaitsWhenNoneIdle: at the total with every connection busy, a
// newcomer waits; when one goes idle it is closed for the newcomer.
func TestConnCapWaitsWhenNoneIdle(t *testing.T) {
	s := startLimited(t, "tcp", "127.0.0.1:0", 2, 100, nil)
	a, b := testenv.DialFrom(t, "127.0.0.2", s.addr), testenv.DialFrom(t, "127.0.0.2", s.addr)
	a.Send(t, "/hold/a")
	b.Send(t, "/hold/b")
	s.waitEntered(t, 2)
	c := testenv.DialFrom(t, "127.0.0.1", s.addr)
	c.Send(t, "/")
	s.release("a") // a answers, goes idle, and is closed for c
	if st, err := c.Status(); st != 200 {
		t.Fatalf("newcomer: %d %v, want 200", st, err)
	}
	if st, err := a.Status(); st != 200 || !a.ClosedByServer() {
		t.Errorf("a: %d %v, want 200 and then closed", st, err)
	}
	s.release("b")
	if st, err := b.Status(); st != 200 {
		t.Fatalf("b: %d %v", st, err)
	}
	b.Get(t, "/") // b, busy when c came, is kept
	if open, _ := s.counts(); open != 2 {
		t.Errorf("%d open, want 2", open)
	}
}

// TestConnCapPerClient: a client at its bound with every connection busy
// is refused a new one (503); another address is not; once one of its
// connections is idle, a new one closes it instead.
func TestConnCapPerClient(t *testing.T) {
	s := startLimited(t, "tcp", "127.0.0.1:0", 100, 2, nil)
	a1, a2 := testenv.DialFrom(t, "127.0.0.2", s.addr), testenv.DialFrom(t, "127.0.0.2", s.addr)
	a1.Send(t, "/hold/a1")
	a2.Send(t, "/hold/a2")
	s.waitEntered(t, 2)
	if !testenv.DialFrom(t, "127.0.0.2", s.addr).Refused(t) {
		t.Error("a third busy connection from one client was not refused with 503")
	}
	testenv.DialFrom(t, "127.0.0.1", s.addr).Get(t, "/") // another client is not
	s.release("a1")
	if st, err := a1.Status(); st != 200 {
		t.Fatalf("a1: %d %v", st, err)
	}
	s.waitIdle(t, 2) // a1 and 127.0.0.1's
	testenv.DialFrom(t, "127.0.0.2", s.addr).Get(t, "/")
	if !a1.ClosedByServer() {
		t.Error("the client's idle connection was not closed for its newcomer")
	}
	s.release("a2")
	if st, err := a2.Status(); st != 200 {
		t.Fatalf("a2: %d %v", st, err)
	}
	a2.Get(t, "/") // busy when the newcomer came: kept
}

// TestConnCapTrustedProxy: a trusted proxy's connections have no
// per-client bound (it pools many clients); an untrusted peer's do.
func TestConnCapTrustedProxy(t *testing.T) {
	trusted, err := clientip.ParseTrusted("127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	s := startLimited(t, "tcp", "127.0.0.1:0", 100, 1, trusted)
	for range 3 {
		testenv.DialFrom(t, "127.0.0.2", s.addr).Send(t, "/hold/proxy")
	}
	s.waitEntered(t, 3)
	testenv.DialFrom(t, "127.0.0.3", s.addr).Send(t, "/hold/client")
	s.waitEntered(t, 4)
	if !testenv.DialFrom(t, "127.0.0.3", s.addr).Refused(t) {
		t.Error("an untrusted client's second busy connection was not refused")
	}
	if open, _ := s.counts(); open != 4 {
		t.Errorf("%d open, want 4 (the proxy's count in the total)", open)
	}
}

// TestConnCapStalledPerClient: at its bound with no connection idle, a
// client's newcomer is refused while its fresh connections are younger
// than stalledAfter; then it closes the oldest stalled one. A busy
// connection is never shed, nor one past its first request.
func TestConnCapStalledPerClient(t *testing.T) {
	s := startLimited(t, "tcp", "127.0.0.1:0", 100, 3, nil)
	mu := &s.l.mu
	now := time.Unix(1_000_000, 0)
	mu.Lock()
	s.l.now = func() time.Time { return now } // read under l.mu
	mu.Unlock()
	advance := func(d time.Duration) {
		mu.Lock()
		now = now.Add(d)
		mu.Unlock()
	}
	busy := testenv.DialFrom(t, "127.0.0.2", s.addr)
	busy.Send(t, "/hold/busy")
	s.waitEntered(t, 1)
	advance(time.Hour) // busy is past its first request: never stalled
	a := testenv.DialFrom(t, "127.0.0.2", s.addr)
	a.SendHeaders("/", "X-A: 1\r\n", false)
	s.waitOpen(t, 2) // a admitted at now
	advance(time.Second)
	b := testenv.DialFrom(t, "127.0.0.2", s.addr)
	b.SendHeaders("/", "X-B: 1\r\n", false)
	s.waitOpen(t, 3)
	advance(stalledAfter - time.Second - time.Millisecond) // a is not stalled yet
	if !testenv.DialFrom(t, "127.0.0.2", s.addr).Refused(t) {
		t.Error("a newcomer was admitted with the client at its bound and none stalled")
	}
	advance(time.Millisecond) // a has stalled, b not
	testenv.DialFrom(t, "127.0.0.2", s.addr).Get(t, "/")
	if !a.ClosedByServer() {
		t.Error("the stalled connection was not closed for the newcomer")
	}
	io.WriteString(b, "\r\n")
	if st, err := b.Status(); st != 200 {
		t.Errorf("b (fresh, not stalled): %d %v, want 200", st, err)
	}
	s.release("busy")
	if st, err := busy.Status(); st != 200 {
		t.Errorf("busy: %d %v, want 200", st, err)
	}
	if open, _ := s.counts(); open > 3 {
		t.Errorf("%d open, want at most 3", open)
	}
}

func (s *limitedServer) waitOpen(t *testing.T, n int) {
	t.Helper()
	testenv.Eventually(t, guard, fmt.Sprintf("%d open connections", n), func() bool {
		open, _ := s.counts()
		return open == n
	})
}

// TestConnCapStalledAtTotal: at the total with none idle, a newcomer
// closes the oldest stalled connection, whoever's it is, instead of
// waiting for it to time out.
func TestConnCapStalledAtTotal(t *testing.T) {
	s := startLimited(t, "tcp", "127.0.0.1:0", 2, 100, nil)
	now := time.Unix(1_000_000, 0)
	s.l.mu.Lock()
	s.l.now = func() time.Time { return now }
	s.l.mu.Unlock()
	a := testenv.DialFrom(t, "127.0.0.2", s.addr)
	a.SendHeaders("/", "X-A: 1\r\n", false)
	b := testenv.DialFrom(t, "127.0.0.3", s.addr)
	b.Send(t, "/hold/b")
	s.waitEntered(t, 1)
	s.l.mu.Lock()
	now = now.Add(stalledAfter)
	s.l.mu.Unlock()
	testenv.DialFrom(t, "127.0.0.1", s.addr).Get(t, "/")
	if !a.ClosedByServer() {
		t.Error("the stalled connection was not closed for the newcomer")
	}
	s.release("b")
	if st, err := b.Status(); st != 200 {
		t.Errorf("b (busy): %d %v, want 200", st, err)
	}
}

// fakeConn is a connection from a chosen remote address.
type fakeConn struct {
	net.Conn
	remote netip.AddrPort
}

func (c fakeConn) RemoteAddr() net.Addr { return net.TCPAddrFromAddrPort(c.remote) }

func newFakeConn(t *testing.T, addr string) fakeConn {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { b.Close() })
	return fakeConn{Conn: a, remote: netip.AddrPortFrom(netip.MustParseAddr(addr), 443)}
}

// TestConnCapIPv6ByPrefix: IPv6 clients are one client per /64.
func TestConnCapIPv6ByPrefix(t *testing.T) {
	l := New(nil, 100, 1, nil)
	admit := func(addr string) *conn {
		c, err := l.admit(newFakeConn(t, addr))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := admit("2001:db8:1:2::a")
	if first == nil {
		t.Fatal("first connection refused")
	}
	if admit("2001:db8:1:2:ffff::b") != nil {
		t.Error("a second busy connection from the same /64 was admitted")
	}
	if admit("2001:db8:1:3::a") == nil {
		t.Error("another /64 was refused")
	}
	l.ConnState(first, http.StateIdle)
	if admit("2001:db8:1:2::c") == nil {
		t.Error("a newcomer from the /64 was refused while its connection was idle")
	}
	if !first.gone {
		t.Error("the /64's idle connection was not closed for the newcomer")
	}
}

// TestConnCapIPv6Loopback: the per-client bound on a real IPv6 socket.
func TestConnCapIPv6Loopback(t *testing.T) {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	ln.Close()
	s := startLimited(t, "tcp6", "[::1]:0", 100, 1, nil)
	testenv.DialFrom(t, "::1", s.addr).Send(t, "/hold/a")
	s.waitEntered(t, 1)
	if !testenv.DialFrom(t, "::1", s.addr).Refused(t) {
		t.Error("a second busy connection from ::1 was not refused")
	}
}

// TestConnCapFreesMemoryAfterBurst: once a burst of at least freeAfter
// drains below a quarter of its peak, the limiter frees memory; not again
// within freeEvery, and again after it.
func TestConnCapFreesMemoryAfterBurst(t *testing.T) {
	l := New(nil, 100, 100, nil)
	now := time.Unix(1_000_000, 0)
	l.freeAfter, l.now, l.free = 8, func() time.Time { return now }, func() {}
	burst := func(n int) []*conn {
		var cs []*conn
		for i := range n {
			c, err := l.admit(newFakeConn(t, "192.0.2."+strconv.Itoa(i+1)))
			if err != nil || c == nil {
				t.Fatalf("admit: %v %v", c, err)
			}
			cs = append(cs, c)
		}
		return cs
	}
	closeAll := func(cs []*conn) {
		for _, c := range cs {
			c.Close()
		}
	}
	cs := burst(8)
	closeAll(cs[:6])
	if l.frees != 0 {
		t.Fatalf("freed %d times with 2 of 8 open (not below a quarter)", l.frees)
	}
	cs[6].Close()
	if l.frees != 1 {
		t.Fatalf("freed %d times with 1 of 8 open, want 1", l.frees)
	}
	cs[7].Close()
	closeAll(burst(8))
	if l.frees != 1 {
		t.Fatalf("freed %d times, want no second within freeEvery", l.frees)
	}
	now = now.Add(l.freeEvery)
	closeAll(burst(1)) // the second burst's peak is kept until it is freed
	if l.frees != 2 {
		t.Fatalf("freed %d times after freeEvery, want 2", l.frees)
	}
	now = now.Add(l.freeEvery)
	closeAll(burst(7)) // below freeAfter: no burst
	if l.frees != 2 {
		t.Fatalf("freed %d times after 7 connections, want still 2", l.frees)
	}
}

// BenchmarkIdleHolders: one client (127.0.0.2) holds N idle keep-alive
// connections, N = the total bound (USHER_BENCH_HOLDERS, default 3,000),
// opening one more before each poll of an honest client (127.0.0.1, a new
// connection per poll). Reported: the honest polls' success rate and mean
// latency (compare with attacker=none), the resident memory per held
// connection, and resident memory after the holders close (free=off: the
// limiter does not return memory to the OS). Both ends share the process;
// the client's end of a connection is a socket without a goroutine.
func BenchmarkIdleHolders(b *testing.B) {
	n := 3000
	if v := os.Getenv("USHER_BENCH_HOLDERS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name       string
		hold, free bool
	}{{"attacker=none", false, true}, {"attacker=held/free=on", true, true}, {"attacker=held/free=off", true, false}} {
		b.Run(bc.name, func(b *testing.B) {
			raw, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			l := New(raw, n, n, nil)
			freed := make(chan struct{}, 1)
			l.free = func() {
				if bc.free {
					debug.FreeOSMemory()
				}
				freed <- struct{}{}
			}
			srv := &http.Server{
				Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
				ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, ConnState: l.ConnState,
			}
			go srv.Serve(l)
			defer srv.Close()
			addr := raw.Addr().String()
			openIdle := func() net.Conn {
				c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).Dial("tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: usher.test\r\n\r\n")
				res, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					b.Fatal(err)
				}
				res.Body.Close()
				return c
			}
			idle := func() int { l.mu.Lock(); defer l.mu.Unlock(); return l.idle.Len() }
			open := func() int { l.mu.Lock(); defer l.mu.Unlock(); return l.open }
			await := func(what string, cond func() bool) {
				for deadline := time.Now().Add(guard); !cond(); time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						b.Fatalf("still waiting for %s", what)
					}
				}
			}
			runtime.GC()
			rssBefore := rss()
			var ring []net.Conn
			if bc.hold {
				for range n {
					ring = append(ring, openIdle())
				}
				// From 90% on each newcomer closes the longest-idle one:
				// the holders keep about 90% of the bound, all idle.
				await("the holders to be idle", func() bool { return open() >= n*9/10 && idle() == open() })
			}
			rssFull := rss()
			honest := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
				DisableKeepAlives: true,
				DialContext:       (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}).DialContext,
			}}
			var polls, ok int
			var spent time.Duration
			next := 0
			for b.Loop() {
				if bc.hold {
					ring[next].Close() // the oldest: the server closed it for a newcomer
					ring[next] = openIdle()
					next = (next + 1) % n
				}
				start := time.Now()
				res, err := honest.Get("http://" + addr + "/")
				if err == nil {
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode == 200 {
						ok++
					}
				}
				spent += time.Since(start)
				polls++
			}
			b.StopTimer()
			b.ReportMetric(100*float64(ok)/float64(polls), "honest-ok-%")
			b.ReportMetric(float64(spent.Microseconds())/float64(polls), "honest-µs/poll")
			if !bc.hold || rssBefore == 0 {
				return
			}
			for _, c := range ring {
				c.Close()
			}
			await("the holders to close", func() bool { return open() == 0 })
			select {
			case <-freed:
			case <-time.After(guard):
				b.Fatal("the drained burst did not free memory")
			}
			b.ReportMetric(float64(rssFull-rssBefore)/1024/float64(n), "rss-KiB/held")
			b.ReportMetric(float64(rssBefore)/(1<<20), "rss-MB-before")
			b.ReportMetric(float64(rssFull)/(1<<20), "rss-MB-held")
			b.ReportMetric(float64(rss())/(1<<20), "rss-MB-drained")
		})
	}
}

// rss returns the process's resident memory in bytes, 0 where
// /proc/self/status is missing.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
