package capacity

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"usher/internal/hist"
)

// Probe is what Measure sends.
type Probe struct {
	URL    string
	Method string // default GET
	Body   []byte
	Header http.Header
	// Concurrency is how many requests are in flight at once; keep it below
	// the pool so that none waits (seed 002 uses 5 for a pool of 10).
	Concurrency int
	// Requests is how many are measured (seed 002: 50); Warmup more are sent
	// first and not measured.
	Requests, Warmup int
	// Timeout bounds each request (default 30 s).
	Timeout time.Duration
}

// Measurement is the service time Measure saw.
type Measurement struct {
	URL         string        `json:"url"`
	Concurrency int           `json:"concurrency"`
	Errors      int           `json:"errors"`
	Elapsed     time.Duration `json:"-"`
	// Latency summarises successful requests (2xx, and 404 and 409, which
	// seed 002 counts as served).
	Latency hist.Summary `json:"latency"`
	// Throughput is successful requests per second; LittleThroughput is
	// Concurrency ÷ average latency, which should agree when nothing queues.
	Throughput       float64 `json:"throughput"`
	LittleThroughput float64 `json:"little_throughput"`
}

// Measure sends p.Requests requests, p.Concurrency at a time, and measures
// their latency: seed 002's first test, which gives the service time.
func Measure(ctx context.Context, client *http.Client, p Probe) (Measurement, error) {
	if p.Method == "" {
		p.Method = http.MethodGet
	}
	if p.Timeout <= 0 {
		p.Timeout = 30 * time.Second
	}
	if p.Concurrency < 1 || p.Requests < 1 || p.Warmup < 0 {
		return Measurement{}, fmt.Errorf("%w: measure: want concurrency and requests of at least 1", ErrInvalid)
	}
	if _, err := http.NewRequest(p.Method, p.URL, nil); err != nil {
		return Measurement{}, fmt.Errorf("%w: measure: %v", ErrInvalid, err)
	}
	one := func() (time.Duration, bool, error) {
		ctx, cancel := context.WithTimeout(ctx, p.Timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, p.Method, p.URL, bytes.NewReader(p.Body))
		if err != nil {
			return 0, false, err
		}
		for k, v := range p.Header {
			req.Header[k] = v
		}
		start := time.Now()
		res, err := client.Do(req)
		if err != nil {
			return 0, false, err
		}
		_, err = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		d := time.Since(start)
		ok := err == nil && (res.StatusCode/100 == 2 || res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusConflict)
		return d, ok, nil
	}
	for range p.Warmup {
		if _, _, err := one(); err != nil {
			return Measurement{}, fmt.Errorf("measure %s: %w", p.URL, err)
		}
	}

	rec := hist.NewRecorder()
	var (
		mu       sync.Mutex
		errs     int
		firstErr error
		next     int
		wg       sync.WaitGroup
	)
	take := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if next >= p.Requests || ctx.Err() != nil {
			return false
		}
		next++
		return true
	}
	start := time.Now()
	for range min(p.Concurrency, p.Requests) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for take() {
				d, ok, err := one()
				if ok {
					rec.Record(d)
					continue
				}
				mu.Lock()
				errs++
				if firstErr == nil && err != nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return Measurement{}, err
	}
	s := rec.Snapshot()
	if s.Count() == 0 {
		if firstErr != nil {
			return Measurement{}, fmt.Errorf("measure %s: every request failed: %w", p.URL, firstErr)
		}
		return Measurement{}, fmt.Errorf("measure %s: every request failed (status not 2xx, 404 or 409)", p.URL)
	}
	m := Measurement{
		URL: p.URL, Concurrency: p.Concurrency, Errors: errs, Elapsed: elapsed,
		Latency:    s.Summary(),
		Throughput: float64(s.Count()) / elapsed.Seconds(),
	}
	if mean := s.Mean(); mean > 0 {
		m.LittleThroughput = float64(min(p.Concurrency, p.Requests)) / mean.Seconds()
	}
	return m, nil
}
