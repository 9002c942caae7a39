package main

import (
	"net"
	"sync"
)

// capListener accepts at most n connections open at once: Accept waits for
// one to close. A stranger's connections are a resource like any other; the
// cap keeps a flood of idle or slow connections from exhausting the
// process's file descriptors and memory (those beyond it wait in the
// kernel's accept queue).
type capListener struct {
	net.Listener
	sem chan struct{}
}

func capConns(ln net.Listener, n int) net.Listener {
	return &capListener{Listener: ln, sem: make(chan struct{}, n)}
}

func (l *capListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &capConn{Conn: c, release: func() { <-l.sem }}, nil
}

type capConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
