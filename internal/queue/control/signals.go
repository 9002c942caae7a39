package control

import (
	"strconv"
	"time"

	"usher/internal/hist"
)

// Signals are origin latency samples and errors, pooled per room in the
// store between controller steps: a fixed histogram (package hist's
// layout), so that pooling is an addition and instances merge exactly.
type Signals struct {
	Count   int64 // latency samples
	Errors  int64 // failed origin requests (5xx, no answer)
	Buckets hist.Dense
}

// Add records one latency sample, and an error if failed.
func (s *Signals) Add(d time.Duration, failed bool) {
	s.Count++
	s.Buckets.Add(d)
	if failed {
		s.Errors++
	}
}

// Merge adds o's samples to s (sign -1 subtracts them).
func (s *Signals) Merge(o Signals, sign int64) {
	s.Count += sign * o.Count
	s.Errors += sign * o.Errors
	s.Buckets.Merge(&o.Buckets, sign)
}

// Quantile returns the latency of nearest rank q among the samples, within
// hist.RelativeError (2 %); 0 when empty.
func (s Signals) Quantile(q float64) time.Duration { return s.Buckets.Quantile(q) }

// SignalPairs lists s's non-zero counters as store field names and values:
// n, errors, b<k> for hist bucket k (negative below 1 ms).
func (s Signals) SignalPairs() []string {
	var out []string
	add := func(name string, v int64) {
		if v != 0 {
			out = append(out, name, strconv.FormatInt(v, 10))
		}
	}
	add("n", s.Count)
	add("errors", s.Errors)
	for k, n := range s.Buckets.All() {
		add("b"+strconv.Itoa(k), n)
	}
	return out
}

// SetSignal sets the counter that SignalPairs names name; unknown names are
// ignored.
func (s *Signals) SetSignal(name string, v int64) {
	switch {
	case name == "n":
		s.Count = v
	case name == "errors":
		s.Errors = v
	case len(name) > 1 && name[0] == 'b':
		if k, err := strconv.Atoi(name[1:]); err == nil {
			s.Buckets.Set(k, v)
		}
	}
}
