package capacity

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func TestMeasure(t *testing.T) {
	const work = 20 * time.Millisecond
	var inFlight, peak, seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if seen.Add(1)%5 == 0 {
			w.WriteHeader(http.StatusConflict) // served, as seed 002 counts a taken seat
		}
		time.Sleep(work)
	}))
	defer srv.Close()

	m, err := Measure(context.Background(), srv.Client(), Probe{URL: srv.URL, Concurrency: 4, Requests: 40, Warmup: 2})
	if err != nil {
		t.Fatal(err)
	}
	if m.Latency.Count != 40 || m.Errors != 0 {
		t.Errorf("count %d, errors %d, want 40 and 0", m.Latency.Count, m.Errors)
	}
	if got := peak.Load(); got > 4 {
		t.Errorf("server saw %d requests at once, want at most the concurrency 4", got)
	}
	if seen.Load() != 42 {
		t.Errorf("server saw %d requests, want 40 + 2 warmup", seen.Load())
	}
	ms := float64(work) / float64(time.Millisecond)
	if m.Latency.Min < ms || m.Latency.Avg < ms || m.Latency.P50 > m.Latency.P95 || m.Latency.P95 > m.Latency.Max {
		t.Errorf("latency %+v: want every figure at least the work time %v ms, and ordered", m.Latency, ms)
	}
	// Little's law holds without queueing: throughput ≈ concurrency ÷ avg.
	if r := m.Throughput / m.LittleThroughput; r < 0.5 || r > 1.5 {
		t.Errorf("throughput %v vs Little's %v: ratio %v, want near 1", m.Throughput, m.LittleThroughput, r)
	}
}

func TestMeasureFailures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	if _, err := Measure(context.Background(), srv.Client(), Probe{URL: srv.URL, Concurrency: 2, Requests: 5}); err == nil {
		t.Error("Measure against a failing server: err = nil, want an error")
	}
	if _, err := Measure(context.Background(), srv.Client(), Probe{URL: srv.URL, Concurrency: 0, Requests: 5}); err == nil {
		t.Error("Measure with concurrency 0: err = nil, want an error")
	}
	if _, err := Measure(context.Background(), srv.Client(), Probe{URL: "::bad", Concurrency: 1, Requests: 1}); err == nil {
		t.Error("Measure with a bad URL: err = nil, want an error")
	}
}
