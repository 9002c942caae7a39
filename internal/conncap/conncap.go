// Package conncap bounds the client connections a server holds open: a
// net.Listener that caps them in all and per client (clientip.KeyAddr of the
// peer: an IPv4 address, an IPv6 /64) and makes room by closing idle
// keep-alive connections, then stalled ones (no first request after 2 s),
// never busy or hijacked ones. A newcomer over its client's bound with none
// to close gets a plaintext 503; at the total, Accept waits.
//
// The server's ConnState must be the Listener's: that is how it learns which
// connections are idle and which have not sent a request yet.
//
// Limits: plain TCP only (the 503 is written on the socket); a client spread
// over many addresses is bounded by the total alone; trusted proxies have no
// per-client bound; stalled connections are looked for only when a newcomer
// needs room, so the server's header timeout must close the rest.
package conncap

import (
	"container/list"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"sync"
	"time"

	"usher/internal/clientip"
)

// Listener bounds the client connections open at once: total in all and
// perClient from one client. A peer in trusted is a proxy pooling many
// clients' requests: it has no per-client bound, but its connections count
// in the total. It tells connections idle between requests from fresh ones
// (not past their first request's headers) by the server's ConnState.
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
// peak, the Listener returns the freed memory to the OS, at most once per
// freeEvery; it looks only when a connection closes, with no timer.
type Listener struct {
	ln                       net.Listener
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
	idle    list.List  // of *conn, longest idle first
	fresh   list.List  // of *conn without a first request yet, oldest first
	clients map[string]*clientConns
	peak    int // most open since the last free
	freed   time.Time
	frees   int
	closed  bool
}

var _ net.Listener = (*Listener)(nil)

// stalledAfter is how long a connection may go without sending its first
// request's headers before a newcomer may close it.
const stalledAfter = 2 * time.Second

// clientConns are one client's open connections.
type clientConns struct {
	key   string
	open  int
	idle  list.List // of *conn, longest idle first
	fresh list.List // of *conn, oldest first
}

// conn is a connection the Listener accepted; its fields past Conn
// are guarded by the Listener's mutex.
type conn struct {
	net.Conn
	l                  *Listener
	client             *clientConns // nil: a trusted proxy's
	accepted           time.Time
	inIdle, inClient   *list.Element
	inFresh, inClFresh *list.Element
	hijacked, gone     bool
}

// New returns ln under the bounds; the server that serves it must have
// the Listener's ConnState as its own. New starts no goroutine.
func New(ln net.Listener, total, perClient int, trusted clientip.Trusted) *Listener {
	l := &Listener{
		ln: ln, total: total, perClient: perClient, shedAt: total - total/10, trusted: trusted,
		stalledAfter: stalledAfter,
		freeAfter:    1000, freeEvery: time.Minute, now: time.Now, free: debug.FreeOSMemory,
		clients: map[string]*clientConns{},
	}
	l.wake = sync.NewCond(&l.mu)
	return l
}

// refusal answers a connection over its client's bound.
const refusal = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\nContent-Length: 21\r\n\r\ntoo many connections\n"

// Accept returns the next connection within the bounds, answering and
// closing those refused.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		raw, err := l.ln.Accept()
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
func (l *Listener) admit(raw net.Conn) (*conn, error) {
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
				l.shed(e.Value.(*conn))
			} else if c := l.stalled(cl.fresh.Front(), now); c != nil {
				l.shed(c)
			} else {
				return nil, nil
			}
		}
		if l.open >= l.shedAt && l.idle.Len() > 0 {
			l.shed(l.idle.Front().Value.(*conn))
		}
		if l.open >= l.total {
			if c := l.stalled(l.fresh.Front(), now); c != nil {
				l.shed(c)
			}
		}
		if l.open < l.total {
			c := &conn{Conn: raw, l: l, accepted: now}
			c.inFresh = l.fresh.PushBack(c)
			if key != "" {
				if cl == nil {
					cl = &clientConns{key: key}
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
func (l *Listener) waitAtTotal(now time.Time) {
	e := l.fresh.Front()
	if e == nil {
		l.wake.Wait()
		return
	}
	t := time.AfterFunc(e.Value.(*conn).accepted.Add(l.stalledAfter).Sub(now), func() {
		l.mu.Lock()
		l.wake.Broadcast()
		l.mu.Unlock()
	})
	l.wake.Wait()
	t.Stop()
}

// stalled is the connection at e (the front of a fresh list) if it has
// been fresh for stalledAfter at now; else nil.
func (l *Listener) stalled(e *list.Element, now time.Time) *conn {
	if e == nil {
		return nil
	}
	if c := e.Value.(*conn); now.Sub(c.accepted) >= l.stalledAfter {
		return c
	}
	return nil
}

// shed closes an idle or stalled connection; l.mu is held.
func (l *Listener) shed(c *conn) {
	l.drop(c)
	// Closing the socket under the lock is safe: the server's goroutine
	// reading it leaves Read without taking l.mu, and its ConnState and
	// Close find the connection gone.
	c.Conn.Close()
}

// drop forgets a connection that is closed or being closed; l.mu is held.
func (l *Listener) drop(c *conn) {
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

func (l *Listener) unidle(c *conn) {
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
func (l *Listener) unfresh(c *conn) {
	if c.inFresh != nil {
		l.fresh.Remove(c.inFresh)
		c.inFresh = nil
	}
	if c.inClFresh != nil {
		c.client.fresh.Remove(c.inClFresh)
		c.inClFresh = nil
	}
}

// ConnState is the server's ConnState hook: set http.Server.ConnState to it.
func (l *Listener) ConnState(nc net.Conn, s http.ConnState) {
	c, ok := nc.(*conn)
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
func (l *Listener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.wake.Broadcast()
	l.mu.Unlock()
	return l.ln.Close()
}

// Addr is the address ln listens on.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.drop(c)
	c.l.mu.Unlock()
	return err
}

// CloseWrite lets the server half-close before it closes, as it does on
// a *net.TCPConn, so that a client reads an error answer before the reset.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
