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
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := capConns(raw, 3)
	defer ln.Close()
	var open, most atomic.Int64
	var served sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := open.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			served.Add(1)
			go func() {
				defer served.Done()
				buf := make([]byte, 1)
				c.Read(buf) // until the client closes
				open.Add(-1)
				c.Close()
			}()
		}
	}()
	var clients sync.WaitGroup
	for range 20 {
		clients.Add(1)
		go func() {
			defer clients.Done()
			c, err := net.Dial("tcp", raw.Addr().String())
			if err != nil {
				t.Error(err)
				return
			}
			c.Write([]byte("x")) // the server reads one byte, then the client closes
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			c.Read(make([]byte, 1)) // ends when the server closes
			c.Close()
		}()
	}
	clients.Wait()
	served.Wait()
	if m := most.Load(); m > 3 || m < 1 {
		t.Fatalf("at most %d connections were open at once, want 1 to 3", m)
	}
}
