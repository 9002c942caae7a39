package main

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCapConns: with a cap of 3, concurrent clients never have more than 3
// connections accepted and open, and a closed one makes room for the next.
func TestCapConns(t *testing.T) {
	const clients = 20
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := capConns(raw, 3)
	defer ln.Close()
	var open, most atomic.Int64
	var served sync.WaitGroup
	served.Add(clients)
	go func() {
		for range clients {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := open.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			go func() {
				defer served.Done()
				c.Read(make([]byte, 1)) // the client's one byte
				open.Add(-1)
				c.Close()
			}()
		}
	}()
	errs := make(chan error, clients)
	for range clients {
		go func() {
			c, err := net.Dial("tcp", raw.Addr().String())
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.Write([]byte("x"))
			c.SetReadDeadline(time.Now().Add(20 * time.Second)) // bounds a failure
			c.Read(make([]byte, 1))                             // ends when the server closes
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	served.Wait()
	if m := most.Load(); m > 3 || m < 1 {
		t.Fatalf("at most %d connections were open at once, want 1 to 3", m)
	}
}
