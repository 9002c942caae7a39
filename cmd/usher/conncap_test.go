package main

import (
	"net"
	"testing"
	"time"
)

// TestCapConns: with a cap of 3 and 3 connections held open, the listener
// takes no fourth (its semaphore is full, so Accept waits); closing one
// lets the fourth in.
func TestCapConns(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := capConns(raw, 3).(*capListener)
	defer ln.Close()
	accepted := make(chan net.Conn)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	for range 4 {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	guard := time.After(time.Minute) // bounds a failure, measures nothing
	var held []net.Conn
	for len(held) < 3 {
		select {
		case c := <-accepted:
			held = append(held, c)
		case <-guard:
			t.Fatalf("accepted %d of the first 3 connections", len(held))
		}
	}
	// The accept loop now waits for a slot: the semaphore is full, and the
	// fourth connection sits in the kernel's queue.
	if n := len(ln.sem); n != 3 {
		t.Fatalf("%d slots taken with 3 connections open, want 3", n)
	}
	select {
	case <-accepted:
		t.Fatal("a fourth connection was accepted while 3 were open")
	default:
	}
	held[0].Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-guard:
		t.Fatal("closing a connection did not let the fourth in")
	}
	for _, c := range held[1:] {
		c.Close()
	}
}
