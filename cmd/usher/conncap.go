package main

import (
	"container/list"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"sync"
	"time"

	"usher/internal/clientip"
	"usher/internal/edgeconf"
)

// defaultMaxConnsPerClient is --max-conns-per-client's default. One public
// IPv4 address of a carrier-grade NAT carries tens to thousands of
// subscribers, each browser with up to 6 connections, so the bound is not
// "a few per user": it is how many of one address's connections may be in
// the middle of a request (or a stream) at once. Idle ones are shed to make
// room, so a crowd behind one address keeps working at 512; a single
// client needs 20 addresses to fill the default 10,000 with busy
// connections.
const defaultMaxConnsPerClient = 512

// defaultMaxHeaderBytes is --max-header-bytes' default: as much as nginx's
// default buffers hold (4 of 8 KiB), room for a site's many cookies. Go's
// server reads up to 4 KiB past it before it answers 431, and keeps every
// header line it has read until the request ends: a connection stalled
// just under the bound costs about ten times the bytes in the worst case
// (tiny header lines; docs/benchmarks.md).
const defaultMaxHeaderBytes = edgeconf.DefaultMaxHeaderBytes

// connFlags are the bounds on what a client's connections hold: the
// connection caps and the size and time of a request's headers, shared by
// serve, proxy and auth.
type connFlags struct {
	total, perClient, headerBytes *int
	headerTimeout                 *time.Duration
}

// addConnFlags defines them on f; headerTimeout is --header-timeout's
// default.
func addConnFlags(f *flags, headerTimeout time.Duration) connFlags {
	return connFlags{
		total: f.int("max-conns", 10_000,
			"most client connections open at once; from 90% on a newcomer closes the longest-idle one; at the cap with none idle, the longest-stalled one (no request after 2 s), else it waits to be accepted"),
		perClient: f.int("max-conns-per-client", defaultMaxConnsPerClient,
			"most connections open at once from one client (IPv4 address, IPv6 /64; --trusted-proxies exempt), including those still sending their first request: a newcomer closes that client's longest-idle one, else its longest-stalled one (no request after 2 s), or is refused with 503 when none is either"),
		headerBytes: f.int("max-header-bytes", defaultMaxHeaderBytes,
			"most bytes of a request's line and headers (Go reads up to 4096 more); a larger request gets 431 and its connection closes"),
		headerTimeout: f.duration("header-timeout", headerTimeout,
			"most time to read a request's line and headers; a client slower than that loses the connection"),
	}
}

// minHeaderBytes is the smallest --max-header-bytes: a browser's request
// with a few cookies.
const minHeaderBytes = 4096

func (cf connFlags) check(f *flags) {
	f.positive("max-conns", float64(*cf.total))
	f.positive("max-conns-per-client", float64(*cf.perClient))
	if *cf.headerBytes < minHeaderBytes {
		f.errs = append(f.errs, fmt.Sprintf("--max-header-bytes/%s: want at least %d", f.envName("max-header-bytes"), minHeaderBytes))
	}
	f.positive("header-timeout", cf.headerTimeout.Seconds())
}

// bound puts ln under the connection caps (trusted: the proxies exempt
// from the per-client one) and srv under the header bounds; srv's
// ConnState becomes the limiter's.
func (cf connFlags) bound(ln net.Listener, srv *http.Server, trusted clientip.Trusted) net.Listener {
	lim := newConnLimiter(ln, *cf.total, *cf.perClient, trusted)
	srv.ConnState = lim.ConnState
	srv.MaxHeaderBytes = *cf.headerBytes
	srv.ReadHeaderTimeout = *cf.headerTimeout
	return lim
}

// connLimiter is a listener that bounds the client connections open at
// once: total in all and perClient from one client (clientip.KeyAddr of the
// peer). A peer in trusted is a proxy pooling many clients' requests: it
// has no per-client bound, but its connections count in the total. The
// server's ConnState must be the limiter's, so that it knows which
// connections are idle between requests and which have not finished their
// first request's headers (fresh).
//
// Every open connection counts, fresh ones included. Idle connections go
// first: a newcomer that finds the total at 90% or more closes the
// longest-idle connection; one whose client is at perClient closes that
// client's longest-idle connection. With none idle, a connection fresh
// for stalledAfter or more goes next: the client's longest-stalled one
// for a newcomer at perClient, anyone's at the total. Else a newcomer at
// perClient is refused (a 503 with Retry-After and Connection: close, then
// closed), and at the total Accept waits for a connection to close, go
// idle or stall. Closing an idle keep-alive connection is what IdleTimeout
// does, so clients handle it (a request that crossed the close is retried
// by clients as for any idle close). An honest client sends its request
// within a round trip of connecting: a connection still without one after
// stalledAfter is a slow-headers attack (or a client the header timeout
// would soon close), and shedding it keeps such an attack from locking the
// other users of its address (a carrier-grade NAT) out. Busy connections
// and hijacked ones (websockets) are never shed; hijacked ones count until
// closed.
//
// After a burst (at least freeAfter open) drains below a quarter of its
// peak, the limiter returns the freed memory to the OS, at most once per
// freeEvery; it looks only when a connection closes, with no timer.
//
// Limits: plain TCP only (the 503 is plaintext); a client spread over
// many addresses is bounded by the total alone; stalled connections are
// looked for only when a newcomer needs room (the header timeout closes
// the rest).
type connLimiter struct {
	net.Listener
	total, perClient, shedAt int
	trusted                  clientip.Trusted
	stalledAfter             time.Duration

	freeAfter int
	freeEvery time.Duration
	now       func() time.Time
	free      func()

	mu      sync.Mutex
	wake    *sync.Cond // a connection closed, went idle or stalled, or the listener closed
	open    int        // accepted, not yet closed
	idle    list.List  // of *limitedConn, longest idle first
	fresh   list.List  // of *limitedConn without a first request yet, oldest first
	clients map[string]*connClient
	peak    int // most open since the last free
	freed   time.Time
	frees   int
	closed  bool
}

// stalledAfter is how long a connection may go without sending its first
// request's headers before a newcomer may close it.
const stalledAfter = 2 * time.Second

type connClient struct {
	key   string
	open  int
	idle  list.List // of *limitedConn, longest idle first
	fresh list.List // of *limitedConn, oldest first
}

// limitedConn is a connection the limiter accepted; its fields past Conn
// are guarded by the limiter's mutex.
type limitedConn struct {
	net.Conn
	l                  *connLimiter
	client             *connClient // nil: a trusted proxy's
	accepted           time.Time
	inIdle, inClient   *list.Element
	inFresh, inClFresh *list.Element
	hijacked, gone     bool
}

func newConnLimiter(ln net.Listener, total, perClient int, trusted clientip.Trusted) *connLimiter {
	l := &connLimiter{
		Listener: ln, total: total, perClient: perClient, shedAt: total - total/10, trusted: trusted,
		stalledAfter: stalledAfter,
		freeAfter:    1000, freeEvery: time.Minute, now: time.Now, free: debug.FreeOSMemory,
		clients: map[string]*connClient{},
	}
	l.wake = sync.NewCond(&l.mu)
	return l
}

// refusal answers a connection over its client's bound.
const refusal = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\nContent-Length: 21\r\n\r\ntoo many connections\n"

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		raw, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c, err := l.admit(raw)
		if err != nil {
			raw.Close()
			return nil, err
		}
		if c != nil {
			return c, nil
		}
		raw.SetWriteDeadline(time.Now().Add(time.Second)) // a socket deadline: the real clock
		raw.Write([]byte(refusal))
		raw.Close()
	}
}

// admit applies the bounds to a newcomer, shedding idle then stalled
// connections and waiting at the total while none is either; nil: refused.
func (l *connLimiter) admit(raw net.Conn) (*limitedConn, error) {
	var peer netip.Addr
	if a, ok := raw.RemoteAddr().(*net.TCPAddr); ok {
		peer = a.AddrPort().Addr().Unmap()
	}
	key := ""
	if !l.trusted.Contains(peer) {
		key = clientip.KeyAddr(peer)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if l.closed {
			return nil, net.ErrClosed
		}
		now := l.now()
		cl := l.clients[key]
		if key != "" && cl != nil && cl.open >= l.perClient {
			if e := cl.idle.Front(); e != nil {
				l.shed(e.Value.(*limitedConn))
			} else if c := l.stalled(cl.fresh.Front(), now); c != nil {
				l.shed(c)
			} else {
				return nil, nil
			}
		}
		if l.open >= l.shedAt && l.idle.Len() > 0 {
			l.shed(l.idle.Front().Value.(*limitedConn))
		}
		if l.open >= l.total {
			if c := l.stalled(l.fresh.Front(), now); c != nil {
				l.shed(c)
			}
		}
		if l.open < l.total {
			c := &limitedConn{Conn: raw, l: l, accepted: now}
			c.inFresh = l.fresh.PushBack(c)
			if key != "" {
				if cl == nil {
					cl = &connClient{key: key}
					l.clients[key] = cl
				}
				cl.open++
				c.client = cl
				c.inClFresh = cl.fresh.PushBack(c)
			}
			l.open++
			l.peak = max(l.peak, l.open)
			return c, nil
		}
		l.waitAtTotal(now)
	}
}

// waitAtTotal waits for a connection to close or go idle, or for the
// oldest fresh one to stall; l.mu is held.
func (l *connLimiter) waitAtTotal(now time.Time) {
	e := l.fresh.Front()
	if e == nil {
		l.wake.Wait()
		return
	}
	t := time.AfterFunc(e.Value.(*limitedConn).accepted.Add(l.stalledAfter).Sub(now), func() {
		l.mu.Lock()
		l.wake.Broadcast()
		l.mu.Unlock()
	})
	l.wake.Wait()
	t.Stop()
}

// stalled is the connection at e (the front of a fresh list) if it has
// been fresh for stalledAfter at now; else nil.
func (l *connLimiter) stalled(e *list.Element, now time.Time) *limitedConn {
	if e == nil {
		return nil
	}
	if c := e.Value.(*limitedConn); now.Sub(c.accepted) >= l.stalledAfter {
		return c
	}
	return nil
}

// shed closes an idle or stalled connection; l.mu is held.
func (l *connLimiter) shed(c *limitedConn) {
	l.drop(c)
	// Closing the socket under the lock is safe: the server's goroutine
	// reading it leaves Read without taking l.mu, and its ConnState and
	// Close find the connection gone.
	c.Conn.Close()
}

// drop forgets a connection that is closed or being closed; l.mu is held.
func (l *connLimiter) drop(c *limitedConn) {
	if c.gone {
		return
	}
	c.gone = true
	l.unidle(c)
	l.unfresh(c)
	l.open--
	if cl := c.client; cl != nil {
		if cl.open--; cl.open == 0 {
			delete(l.clients, cl.key)
		}
	}
	l.wake.Broadcast()
	if l.peak >= l.freeAfter && l.open < l.peak/4 {
		if now := l.now(); now.Sub(l.freed) >= l.freeEvery {
			l.freed, l.peak = now, l.open
			l.frees++
			go l.free()
		}
	}
}

func (l *connLimiter) unidle(c *limitedConn) {
	if c.inIdle != nil {
		l.idle.Remove(c.inIdle)
		c.inIdle = nil
	}
	if c.inClient != nil {
		c.client.idle.Remove(c.inClient)
		c.inClient = nil
	}
}

// unfresh notes that c is past its first request's headers (or gone).
func (l *connLimiter) unfresh(c *limitedConn) {
	if c.inFresh != nil {
		l.fresh.Remove(c.inFresh)
		c.inFresh = nil
	}
	if c.inClFresh != nil {
		c.client.fresh.Remove(c.inClFresh)
		c.inClFresh = nil
	}
}

// ConnState is the server's ConnState hook.
func (l *connLimiter) ConnState(nc net.Conn, s http.ConnState) {
	c, ok := nc.(*limitedConn)
	if !ok || c.l != l {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.gone {
		return
	}
	if s != http.StateNew {
		l.unfresh(c)
	}
	switch s {
	case http.StateIdle:
		if c.inIdle == nil && !c.hijacked {
			c.inIdle = l.idle.PushBack(c)
			if c.client != nil {
				c.inClient = c.client.idle.PushBack(c)
			}
			l.wake.Broadcast()
		}
	case http.StateActive:
		l.unidle(c)
	case http.StateHijacked:
		l.unidle(c)
		c.hijacked = true
	case http.StateClosed:
		l.drop(c)
	}
}

// Close stops Accept, including one waiting for a slot.
func (l *connLimiter) Close() error {
	l.mu.Lock()
	l.closed = true
	l.wake.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.drop(c)
	c.l.mu.Unlock()
	return err
}

// CloseWrite lets the server half-close before it closes, as it does on
// a *net.TCPConn, so that a client reads an error answer before the reset.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
