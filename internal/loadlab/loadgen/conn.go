package loadgen

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// conns is the generator's HTTP/1.1 client: keep-alive connections to one
// or more hosts, each used by one call at a time, written and read with the
// standard library's own Request.Write and ReadResponse. It exists because
// net/http's Transport hands every request between three goroutines (the
// caller, the connection's reader and writer); doing the round trip in the
// caller's goroutine costs about half as much CPU, and the generator shares
// the machine with what it measures. It follows no redirects and speaks no
// HTTP/2, keeps no cookies, and asks for no compression, as load generators
// usually do.
type conns struct {
	timeout time.Duration
	dialer  net.Dialer
	stopped atomic.Bool
	mu      sync.Mutex
	idle    map[string]chan *conn
	all     []*conn // every connection opened, for abort
	aborted bool
}

type conn struct {
	net.Conn
	br *bufio.Reader
	bw *bufio.Writer
}

func newConns(timeout time.Duration) *conns {
	return &conns{timeout: timeout, dialer: net.Dialer{Timeout: 10 * time.Second}, idle: map[string]chan *conn{}}
}

// idleFor returns the host's idle connections.
func (cs *conns) idleFor(key string) chan *conn {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	ch, ok := cs.idle[key]
	if !ok {
		ch = make(chan *conn, 16_384)
		cs.idle[key] = ch
	}
	return ch
}

func (cs *conns) dial(req *http.Request) (*conn, error) {
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), map[bool]string{true: "443", false: "80"}[req.URL.Scheme == "https"])
	}
	nc, err := cs.dialer.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if req.URL.Scheme == "https" {
		nc = tls.Client(nc, &tls.Config{ServerName: req.URL.Hostname()})
	}
	c := &conn{Conn: nc, br: bufio.NewReaderSize(nc, 8<<10), bw: bufio.NewWriterSize(nc, 4<<10)}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.aborted {
		nc.Close()
		return nil, errAborted
	}
	cs.all = append(cs.all, c)
	return c, nil
}

var errAborted = errors.New("loadgen: run aborted")

// do sends req on an idle connection (or a new one) and reads the answer:
// the body is read whole when keep is set, else discarded. A reused
// connection that the server had closed is retried once on a new one, as
// net/http does.
func (cs *conns) do(req *http.Request, keep bool) (status int, header http.Header, body []byte, err error) {
	key := req.URL.Scheme + "://" + req.URL.Host
	idle := cs.idleFor(key)
	for attempt := 0; ; attempt++ {
		if cs.stopped.Load() {
			return 0, nil, nil, errAborted
		}
		if attempt > 0 && req.GetBody != nil {
			if req.Body, err = req.GetBody(); err != nil {
				return 0, nil, nil, err
			}
		}
		var c *conn
		reused := false
		select {
		case c = <-idle:
			reused = true
		default:
			if c, err = cs.dial(req); err != nil {
				return 0, nil, nil, err
			}
		}
		status, header, body, started, err := c.roundTrip(req, cs.timeout, keep)
		if err == nil {
			if header != nil && !closing(header) {
				select {
				case idle <- c:
				default:
					c.Close()
				}
			} else {
				c.Close()
			}
			return status, header, body, nil
		}
		c.Close()
		if !reused || started || attempt > 0 {
			return 0, nil, nil, err
		}
	}
}

func closing(h http.Header) bool { return h.Get("Connection") == "close" }

// roundTrip writes req and reads the answer. started reports that an answer
// had begun to arrive (then the request is not retried).
func (c *conn) roundTrip(req *http.Request, timeout time.Duration, keep bool) (int, http.Header, []byte, bool, error) {
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return 0, nil, nil, false, err
	}
	if err := req.Write(c.bw); err != nil {
		return 0, nil, nil, false, err
	}
	if err := c.bw.Flush(); err != nil {
		return 0, nil, nil, false, err
	}
	if _, err := c.br.Peek(1); err != nil {
		return 0, nil, nil, false, err
	}
	res, err := http.ReadResponse(c.br, req)
	if err != nil {
		return 0, nil, nil, true, err
	}
	var body []byte
	if keep {
		body, err = io.ReadAll(io.LimitReader(res.Body, 1<<20))
	} else {
		_, err = io.Copy(io.Discard, res.Body)
	}
	res.Body.Close()
	if err != nil {
		return 0, nil, nil, true, err
	}
	if res.Close {
		res.Header.Set("Connection", "close")
	}
	return res.StatusCode, res.Header, body, true, nil
}

// abort ends every call in flight and every later one.
func (cs *conns) abort() {
	cs.stopped.Store(true)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.aborted = true
	for _, c := range cs.all {
		c.SetDeadline(time.Unix(1, 0))
		// Closing is left to the caller that holds the connection, or to close.
	}
}

// close closes the idle connections.
func (cs *conns) close() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, ch := range cs.idle {
		for len(ch) > 0 {
			(<-ch).Close()
		}
	}
}
