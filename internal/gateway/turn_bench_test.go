package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/token"
	"usher/internal/wire"
)

// BenchmarkTurn measures the time from a visitor's admission (the end of
// the admission step that admitted it) to its first gated request at the
// origin, with clients that poll the proxy as the waiting page does:
// "poll" without Usher-Wait (every poll_after_ms with the page's jitter),
// "wait" with Usher-Wait: 10 (held in the turn zone). Each round enters
// 40 visitors in a paused room, opens it, and admits 10 a second in steps
// run every second by the benchmark (docs/benchmarks.md):
//
//	go test -run XXX -bench Turn -benchtime 5x ./internal/gateway
//
// It reports the mean, median and p90 in milliseconds over all rounds.
func BenchmarkTurn(b *testing.B) {
	for _, wait := range []string{"", "10"} {
		name := "poll"
		if wait != "" {
			name = "wait"
		}
		b.Run(name, func(b *testing.B) {
			var lat []time.Duration
			for b.Loop() {
				lat = append(lat, turnRound(b, wait, 40)...)
			}
			slices.Sort(lat)
			var sum time.Duration
			for _, d := range lat {
				sum += d
			}
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(sum/time.Duration(len(lat))), "mean_ms")
			b.ReportMetric(ms(lat[len(lat)/2]), "p50_ms")
			b.ReportMetric(ms(lat[len(lat)*9/10]), "p90_ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// turnRound runs one round of n visitors and returns each one's time from
// admission to its first gated request.
func turnRound(b *testing.B, wait string, n int) []time.Duration {
	keys, err := token.LoadDir(b.TempDir(), time.Now)
	if err != nil {
		b.Fatal(err)
	}
	q := queue.New(memqueue.New(), queue.Options{})
	s := queue.DefaultSettings()
	s.State, s.MaxActive, s.AdmitRate, s.Interval = queue.Paused, 10_000, 10, time.Second
	if err := q.PutRoom(context.Background(), "sale", s); err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	arrived := make(map[string]time.Time)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie(wire.RoomTicketCookie("sale")); err == nil {
			if t, err := keys.ParseTicket(c.Value, "sale"); err == nil {
				mu.Lock()
				if _, ok := arrived[t.Visitor]; !ok {
					arrived[t.Visitor] = time.Now()
				}
				mu.Unlock()
			}
		}
		io.WriteString(w, "the site")
	}))
	defer origin.Close()
	u, _ := url.Parse(origin.URL)
	p, err := New(Config{Origin: u, Queue: q, Keys: keys, Rules: Rules{DefaultRoom: "sale"}, Registry: prometheus.NewRegistry(), InsecureCookies: true})
	if err != nil {
		b.Fatal(err)
	}
	proxy := httptest.NewServer(p)
	defer proxy.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q.Run(ctx)

	var wg sync.WaitGroup
	for range n {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		first := make(chan struct{})
		wg.Go(func() { pollAsThePage(ctx, c, proxy.URL+"/shop", wait, first) })
		<-first // in order: visitor i is at place i
	}
	s.State = queue.Open
	if err := q.PutRoom(context.Background(), "sale", s); err != nil {
		b.Fatal(err)
	}
	admitted := make(map[string]time.Time)
	for len(admitted) < n {
		time.Sleep(time.Second)
		res, err := q.Admit(context.Background(), "sale")
		if err != nil {
			b.Fatal(err)
		}
		at := time.Now()
		for _, v := range res.Admitted {
			admitted[v] = at
		}
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	var lat []time.Duration
	for v, at := range admitted {
		if got, ok := arrived[v]; ok {
			lat = append(lat, got.Sub(at))
		} else {
			b.Errorf("visitor %s never reached the origin", v)
		}
	}
	return lat
}

// pollAsThePage polls url as waiting.js does: Accept JSON, Usher-Shown,
// Usher-Wait when wait is set, the next poll after poll_after_ms with the
// page's jitter (0.8-1.2), until the answer is the site. first is closed
// after the first answer.
func pollAsThePage(ctx context.Context, c *http.Client, u, wait string, first chan struct{}) {
	shown := int64(0)
	for i := 0; ctx.Err() == nil; i++ {
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		req.Header.Set("Accept", "application/json")
		if wait != "" {
			req.Header.Set(wire.WaitHeader, wait)
		}
		if shown > 0 {
			req.Header.Set(wire.ShownHeader, strconv.FormatInt(shown, 10))
		}
		res, err := c.Do(req)
		if i == 0 {
			close(first)
		}
		if err != nil {
			return
		}
		var e wire.Entry
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusTooManyRequests {
			return // the site
		}
		if err := json.Unmarshal(body, &e); err != nil {
			panic(fmt.Sprintf("poll: %d %s", res.StatusCode, body))
		}
		shown = e.Position
		delay := time.Duration(float64(e.PollAfterMS)*(0.8+0.4*rand.Float64())) * time.Millisecond
		select {
		case <-ctx.Done():
		case <-time.After(max(250*time.Millisecond, delay)):
		}
	}
}
