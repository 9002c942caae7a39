// Command slowheaders is the adversary of scripts/bench-headers.sh: one
// client that opens connections from one source address and sends on each
// the start of a request, then header lines up to a byte count, and never
// the blank line that ends them; it holds what the server keeps open. Once
// every connection has sent all its bytes or been answered, it prints one
// JSON line (connections still held, answers by status, connections closed
// without an answer), holds for -hold, and exits. All connections are
// opened before any bytes are sent, so that a per-client bound sees them
// all at once.
//
//	go run ./scripts/slowheaders -addr 127.0.0.1:18391 -from 127.0.0.2 -conns 20 -bytes 1048576
//
// It sends traffic only to the address it is given; bench-headers.sh gives
// it a usher on loopback.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	addr := flag.String("addr", "", "host:port of the server")
	from := flag.String("from", "127.0.0.2", "source address of every connection")
	conns := flag.Int("conns", 20, "connections, opened one after the other")
	size := flag.Int("bytes", 1<<20, "header bytes sent on each connection")
	line := flag.Int("line", 100, "bytes per header line")
	settle := flag.Duration("settle", time.Second, "wait for answers after the last byte sent before the report")
	hold := flag.Duration("hold", 3*time.Second, "how long to hold the connections after the report")
	limit := flag.Duration("timeout", 60*time.Second, "most time for the whole run")
	flag.Parse()
	if *addr == "" || *line < 16 {
		fmt.Fprintln(os.Stderr, "slowheaders: -addr is required, -line at least 16")
		os.Exit(2)
	}
	deadline := time.Now().Add(*limit)
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(*from)}, Timeout: 5 * time.Second}
	// One block of header lines, sent again and again.
	var block strings.Builder
	for i := 0; block.Len() < 64<<10; i++ {
		name := "X-Pad-" + strconv.Itoa(i) + ": "
		block.WriteString(name + strings.Repeat("a", *line-len(name)-2) + "\r\n")
	}
	type conn struct {
		net.Conn
		answered chan string // the status of the server's answer, "" for none
	}
	var cs []conn
	dials := 0
	for range *conns {
		c, err := dialer.Dial("tcp", *addr)
		if err != nil {
			dials++
			continue
		}
		c.SetDeadline(deadline)
		cs = append(cs, conn{c, make(chan string, 1)})
	}
	var wg sync.WaitGroup
	for _, c := range cs {
		go func() { // the server's answer, if any
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				c.answered <- ""
				return
			}
			io.Copy(io.Discard, res.Body)
			c.answered <- strconv.Itoa(res.StatusCode)
		}()
		wg.Go(func() { send(c, block.String(), *size) })
	}
	wg.Wait()
	// A server answers as soon as it has read past its bound; give the
	// answers to the last bytes sent time to arrive.
	time.Sleep(*settle)
	statuses := map[string]int{}
	if dials > 0 {
		statuses["dial error"] = dials
	}
	var held []conn
	for _, c := range cs {
		select {
		case st := <-c.answered:
			if st == "" {
				st = "closed"
			}
			statuses[st]++
			c.Close()
		default:
			held = append(held, c)
		}
	}
	statuses["held"] = len(held)
	json.NewEncoder(os.Stdout).Encode(map[string]any{"conns": *conns, "bytes": *size, "statuses": statuses})
	time.Sleep(min(*hold, time.Until(deadline)))
	for _, c := range held {
		c.Close()
	}
}

// send writes a request line and header lines up to size bytes.
func send(c net.Conn, block string, size int) error {
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: usher.test\r\n"); err != nil {
		return err
	}
	for size > 0 {
		b := block
		if len(b) > size {
			b = b[:size]
		}
		if _, err := io.WriteString(c, b); err != nil {
			return err
		}
		size -= len(b)
	}
	return nil
}
