// Command flood is the adversary of scripts/bench-flood.sh: one client that
// asks for new queue places as fast as it can, without cookies, from one
// source address, for a fixed time, and prints what it got as JSON. With
// -mint it first asks that URL for a fresh visitor cookie before each
// entry and sends it along (issue 30 §1's attack).
//
//	go run ./scripts/flood -url http://127.0.0.1:18189/api/v1/rooms/r/entries -from 127.0.0.2 -conns 8 -duration 60s
//
// It sends traffic only to the URL it is given; bench-flood.sh gives it a
// usher on loopback.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

func main() {
	target := flag.String("url", "", "entries URL to flood (POST)")
	from := flag.String("from", "127.0.0.2", "source address of every connection")
	conns := flag.Int("conns", 8, "connections, each sending one request after another")
	duration := flag.Duration("duration", 60*time.Second, "how long to flood")
	mint := flag.String("mint", "", "URL to POST before each entry for a fresh usher_vid cookie, sent with the entry")
	flag.Parse()
	if *target == "" {
		fmt.Fprintln(os.Stderr, "flood: -url is required")
		os.Exit(2)
	}
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(*from)}, Timeout: 5 * time.Second}
	client := &http.Client{ // no cookie jar: every request is a stranger
		Timeout:   10 * time.Second,
		Transport: &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: *conns},
	}
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	var mu sync.Mutex
	statuses := map[string]int{}
	var wg sync.WaitGroup
	for range *conns {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, *target, nil)
				if *mint != "" {
					if c := mintCookie(ctx, client, *mint); c != nil {
						req.AddCookie(c)
					}
				}
				key := "error"
				if res, err := client.Do(req); err == nil {
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
					key = strconv.Itoa(res.StatusCode)
				} else if ctx.Err() != nil {
					return
				}
				mu.Lock()
				statuses[key]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	total := 0
	for _, n := range statuses {
		total += n
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"requests": total, "statuses": statuses, "seconds": duration.Seconds()})
}

// mintCookie POSTs to u and returns the usher_vid cookie of the answer, if
// any.
func mintCookie(ctx context.Context, c *http.Client, u string) *http.Cookie {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	res, err := c.Do(req)
	if err != nil {
		return nil
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	for _, ck := range res.Cookies() {
		if ck.Name == "usher_vid" {
			return &http.Cookie{Name: ck.Name, Value: ck.Value}
		}
	}
	return nil
}
