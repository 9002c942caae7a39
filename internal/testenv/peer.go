package testenv

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// peerGuard bounds a Peer's reads and writes: a guard against a hang (a
// connection the test waits on), measuring nothing.
const peerGuard = time.Minute

// Peer is one end of a client's HTTP/1.1 connection, dialled from a chosen
// loopback address (127.0.0.2, ::1), so that one test can be several
// clients and write requests byte by byte. It is closed when the test ends.
type Peer struct {
	net.Conn
	r *bufio.Reader
}

// DialFrom connects to addr from the local address.
func DialFrom(tb testing.TB, local, addr string) *Peer {
	tb.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(peerGuard))
	return &Peer{Conn: c, r: bufio.NewReader(c)}
}

// Send writes a whole GET request for path.
func (p *Peer) Send(tb testing.TB, path string) {
	tb.Helper()
	if _, err := io.WriteString(p, "GET "+path+" HTTP/1.1\r\nHost: usher.test\r\n\r\n"); err != nil {
		tb.Fatal(err)
	}
}

// SendHeaders starts a GET request for path and writes headers on its own
// goroutine, without the blank line that ends them (unless end): the
// server may stop reading, and answer, at any point.
func (p *Peer) SendHeaders(path, headers string, end bool) {
	go func() {
		req := "GET " + path + " HTTP/1.1\r\nHost: usher.test\r\n" + headers
		if end {
			req += "\r\n"
		}
		io.WriteString(p, req)
	}()
}

// Status reads one answer; 0 with the error if there is none.
func (p *Peer) Status() (int, error) {
	res, err := http.ReadResponse(p.r, nil)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, nil
}

// Get sends a request and wants a 200.
func (p *Peer) Get(tb testing.TB, path string) {
	tb.Helper()
	p.Send(tb, path)
	if st, err := p.Status(); st != 200 {
		tb.Fatalf("GET %s from %s: %d %v, want 200", path, p.LocalAddr(), st, err)
	}
}

// ClosedByServer reports whether the server closed the connection: a read
// ends at EOF or a reset (it waits for that; call it only on a connection
// expected to close).
func (p *Peer) ClosedByServer() bool {
	_, err := p.r.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// Refused reports whether a connection that sends nothing gets a 503 and
// then EOF, as a connection limiter answers.
func (p *Peer) Refused(tb testing.TB) bool {
	tb.Helper()
	st, err := p.Status()
	if err != nil {
		tb.Logf("no answer: %v", err)
		return false
	}
	return st == http.StatusServiceUnavailable && p.ClosedByServer()
}
