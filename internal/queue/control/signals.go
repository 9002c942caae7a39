package control

import (
	"math"
	"strconv"
	"time"
)

// bucketCount is the number of latency buckets in Signals: bucket i holds
// latencies up to bucketBound(i), 250 µs × 2^(i/8) (9 % wide; the last,
// from 15 s up, holds everything longer).
const bucketCount = 128

// bucketBound is the upper bound of latency bucket i.
func bucketBound(i int) time.Duration {
	return time.Duration(float64(250*time.Microsecond) * math.Exp2(float64(i)/8))
}

// Signals are origin latency samples and errors, pooled per room in the
// store between controller steps: a fixed histogram, so that pooling is an
// addition and instances merge exactly.
type Signals struct {
	Count   int64 // latency samples
	Errors  int64 // failed origin requests (5xx, no answer)
	Buckets [bucketCount]int64
}

// bucketOf returns the bucket index of a latency.
func bucketOf(d time.Duration) int {
	if d <= bucketBound(0) {
		return 0
	}
	i := int(math.Ceil(8 * math.Log2(float64(d)/float64(250*time.Microsecond))))
	return min(max(i, 0), bucketCount-1)
}

// Add records one latency sample, and an error if failed.
func (s *Signals) Add(d time.Duration, failed bool) {
	s.Count++
	s.Buckets[bucketOf(d)]++
	if failed {
		s.Errors++
	}
}

// Merge adds o's samples to s (sign -1 subtracts them).
func (s *Signals) Merge(o Signals, sign int64) {
	s.Count += sign * o.Count
	s.Errors += sign * o.Errors
	for i := range s.Buckets {
		s.Buckets[i] += sign * o.Buckets[i]
	}
}

// Quantile returns the latency below which a share q of the samples fall,
// interpolated geometrically within its bucket (within 9 %); 0 when empty.
func (s Signals) Quantile(q float64) time.Duration {
	if s.Count <= 0 {
		return 0
	}
	rank := q * float64(s.Count)
	var seen float64
	for i, n := range s.Buckets {
		if n <= 0 {
			continue
		}
		if seen+float64(n) >= rank {
			lo := float64(bucketBound(i)) / math.Exp2(1.0/8)
			frac := (rank - seen) / float64(n)
			return time.Duration(lo * math.Exp2(frac/8))
		}
		seen += float64(n)
	}
	return bucketBound(bucketCount - 1)
}

// SignalPairs lists s's non-zero counters as store field names and values:
// n, errors, b<i>.
func (s Signals) SignalPairs() []string {
	var out []string
	add := func(name string, v int64) {
		if v != 0 {
			out = append(out, name, strconv.FormatInt(v, 10))
		}
	}
	add("n", s.Count)
	add("errors", s.Errors)
	for i, n := range s.Buckets {
		add("b"+strconv.Itoa(i), n)
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
		if i, err := strconv.Atoi(name[1:]); err == nil && i >= 0 && i < bucketCount {
			s.Buckets[i] = v
		}
	}
}
