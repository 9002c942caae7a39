package testenv

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Proxy is a TCP proxy in front of a real service, so that a test can take
// the service "down" (Cut: every connection closed, new ones closed as soon
// as they open) and bring it back (Restore) without stopping a server that
// other tests share. Refused counts the connections turned away while cut,
// so a test can wait until a client has retried instead of sleeping.
type Proxy struct {
	target  string
	mu      sync.Mutex
	ln      net.Listener
	addr    string
	cut     bool
	refused int
	conns   map[net.Conn]bool
	wg      sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards to target
// (host:port) until the test ends.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p := &Proxy{target: target, conns: map[net.Conn]bool{}}
	if err := p.listen("127.0.0.1:0"); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.close(); p.wg.Wait() })
	return p
}

// Addr is the proxy's host:port; it stays the same across Cut and Restore.
func (p *Proxy) Addr() string { return p.addr }

func (p *Proxy) listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.serve(c)
			}()
		}
	}()
	return nil
}

func (p *Proxy) serve(c net.Conn) {
	p.mu.Lock()
	cut := p.cut
	if cut {
		p.refused++
	}
	p.mu.Unlock()
	if cut {
		c.Close()
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.cut || p.ln == nil { // cut meanwhile
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// Cut closes every connection and closes each new one as soon as it is
// accepted: the service looks down.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Restore forwards new connections again.
func (p *Proxy) Restore(tb testing.TB) {
	tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Kill stops listening and closes every connection, for good: what a
// killed process looks like from outside (new connections are refused,
// requests in flight are cut off). The address stays unused until the
// test ends, unless another test is given it.
func (p *Proxy) Kill() { p.close() }

// Refused is the number of connections closed at once because the proxy
// was cut.
func (p *Proxy) Refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

// close stops listening and closes every connection, when the test ends.
func (p *Proxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

// SilentServer listens on a free loopback port, accepts connections and
// never answers, until the test ends: a service that hangs. It returns the
// address.
func SilentServer(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	return ln.Addr().String()
}

// SilentRedis is a rueidis client on a SilentServer, with short timeouts
// and no retries, closed when the test ends.
func SilentRedis(tb testing.TB) rueidis.Client {
	tb.Helper()
	c, _ := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{SilentServer(tb)},
		ForceSingleClient: true,
		DisableRetry:      true,
		DisableCache:      true,
		Dialer:            net.Dialer{Timeout: 200 * time.Millisecond},
		ConnWriteTimeout:  200 * time.Millisecond,
	})
	if c == nil {
		tb.Fatal("rueidis.NewClient returned no client")
	}
	tb.Cleanup(c.Close)
	return c
}

// HungRedis is a rueidis client on a SilentServer whose own timeouts never
// fire within a test (an hour): only the caller's context deadline ends a
// call, as with a Redis that hangs while its connections stay up. (Its first
// dial is refused, so that creating it does not wait on the silent
// handshake.) It is closed when the test ends.
func HungRedis(tb testing.TB) rueidis.Client {
	tb.Helper()
	var dials atomic.Int32
	c, _ := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{SilentServer(tb)},
		ForceSingleClient: true,
		DisableRetry:      true,
		DisableCache:      true,
		Dialer:            net.Dialer{Timeout: time.Hour, KeepAlive: time.Hour},
		ConnWriteTimeout:  time.Hour,
		DialCtxFn: func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			if dials.Add(1) == 1 {
				return nil, errors.New("testenv: the first dial is refused")
			}
			return d.DialContext(ctx, "tcp", addr)
		},
	})
	if c == nil {
		tb.Fatal("rueidis.NewClient returned no client")
	}
	tb.Cleanup(c.Close)
	return c
}

// ClosedAddr returns a loopback host:port that nothing listens on (it was
// free a moment ago): a service that is down.
func ClosedAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
