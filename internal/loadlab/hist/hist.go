// Package hist records latencies in an HDR-style histogram: log-linear
// buckets, so that every recorded value is known within a bounded relative
// error whatever its magnitude, in fixed memory, mergeable, and cheap to record
// into from many goroutines at once.
//
// Values are durations in nanoseconds. Values below 256 ns have a bucket each
// (exact). Above, each power of two [2^k, 2^(k+1)) is split into 128 equal
// buckets of width 2^(k-7), and a quantile is answered with its bucket's
// midpoint, so it is within RelativeError (1/256, about 0.4 %) of a value of
// the requested rank, then clamped to the exact minimum and maximum. Values
// from 2^42 ns (about 73 minutes) up are counted in the top bucket; the
// maximum stays exact. Negative values count as 0.
//
// A Recorder takes values concurrently (atomic counters, no locks); a
// Snapshot is a plain copy that answers quantiles, merges with another
// (Merge) and subtracts an earlier snapshot of the same recorder (Sub), which
// is how per-interval percentiles are read without pausing the recorder.
package hist

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

const (
	subBits  = 7
	subCount = 1 << subBits // buckets per power of two
	maxExp   = 41           // highest power of two tracked: [2^41, 2^42)
	// NumBuckets is the number of buckets of every histogram.
	NumBuckets = (maxExp-subBits)*subCount + 2*subCount
)

// RelativeError bounds |q − v| / v for a quantile q reported for a value v of
// the requested rank (v ≥ 256 ns; below, quantiles are exact).
const RelativeError = 1.0 / (2 * subCount)

// index is the bucket of v.
func index(v int64) int {
	if v < 2*subCount {
		return int(max(v, 0))
	}
	k := bits.Len64(uint64(v)) - 1
	if k > maxExp {
		return NumBuckets - 1
	}
	shift := k - subBits
	return shift*subCount + int(v>>shift)
}

// bounds returns the lowest value of bucket i and its width.
func bounds(i int) (lo, width int64) {
	if i < 2*subCount {
		return int64(i), 1
	}
	shift := i/subCount - 1
	sub := int64(i - shift*subCount)
	return sub << shift, 1 << shift
}

// Recorder is a histogram that many goroutines may record into at once.
// The zero value is not usable; call NewRecorder.
type Recorder struct {
	counts [NumBuckets]atomic.Uint64
	count  atomic.Uint64
	sum    atomic.Int64
	min    atomic.Int64
	max    atomic.Int64
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	r := &Recorder{}
	r.min.Store(math.MaxInt64)
	r.max.Store(math.MinInt64)
	return r
}

// Record adds one value.
func (r *Recorder) Record(d time.Duration) {
	v := max(int64(d), 0)
	r.counts[index(v)].Add(1)
	r.sum.Add(v)
	for cur := r.min.Load(); v < cur && !r.min.CompareAndSwap(cur, v); cur = r.min.Load() {
	}
	for cur := r.max.Load(); v > cur && !r.max.CompareAndSwap(cur, v); cur = r.max.Load() {
	}
	r.count.Add(1) // last: a snapshot never counts a value whose bucket it missed
}

// Snapshot copies the recorder's state. Values recorded while it runs may
// be missed, never half-counted: Count never exceeds the bucket total.
func (r *Recorder) Snapshot() *Snapshot {
	s := &Snapshot{}
	s.count = r.count.Load()
	s.sum = r.sum.Load()
	s.min, s.max = r.min.Load(), r.max.Load()
	for i := range s.counts {
		s.counts[i] = r.counts[i].Load()
	}
	return s
}

// Snapshot is a histogram that one goroutine reads and changes.
type Snapshot struct {
	counts [NumBuckets]uint64
	// count is the number of values; sum, min and max their sum and
	// extremes (min > max when empty).
	count    uint64
	sum      int64
	min, max int64
}

// New returns an empty Snapshot.
func New() *Snapshot { return &Snapshot{min: math.MaxInt64, max: math.MinInt64} }

// Record adds one value (not safe for concurrent use; see Recorder).
func (s *Snapshot) Record(d time.Duration) {
	v := max(int64(d), 0)
	s.counts[index(v)]++
	s.count++
	s.sum += v
	s.min, s.max = min(s.min, v), max(s.max, v)
}

// Merge adds o's values to s.
func (s *Snapshot) Merge(o *Snapshot) {
	for i, c := range o.counts {
		s.counts[i] += c
	}
	s.count += o.count
	s.sum += o.sum
	s.min, s.max = min(s.min, o.min), max(s.max, o.max)
}

// Sub returns the values recorded in s but not in prev, an earlier snapshot
// of the same recorder. Its extremes are those of the buckets that changed,
// clamped to s's exact ones: accurate within RelativeError.
func (s *Snapshot) Sub(prev *Snapshot) *Snapshot {
	d := New()
	for i := range s.counts {
		c := s.counts[i] - prev.counts[i]
		if c == 0 {
			continue
		}
		d.counts[i] = c
		lo, w := bounds(i)
		d.min, d.max = min(d.min, lo), max(d.max, lo+w-1)
	}
	d.count = s.count - prev.count
	d.sum = s.sum - prev.sum
	if d.count > 0 {
		d.min, d.max = max(d.min, s.min), min(d.max, s.max)
	}
	return d
}

// Count is the number of values recorded.
func (s *Snapshot) Count() uint64 { return s.count }

// Min is the smallest value recorded (0 when empty).
func (s *Snapshot) Min() time.Duration {
	if s.count == 0 {
		return 0
	}
	return time.Duration(s.min)
}

// Max is the largest value recorded (0 when empty).
func (s *Snapshot) Max() time.Duration {
	if s.count == 0 {
		return 0
	}
	return time.Duration(s.max)
}

// Mean is the exact mean (0 when empty).
func (s *Snapshot) Mean() time.Duration {
	if s.count == 0 {
		return 0
	}
	return time.Duration(float64(s.sum) / float64(s.count))
}

// Quantile returns the value of rank ⌈q·Count⌉ (q in [0, 1]), within
// RelativeError; 0 when empty. Quantile(1) is the exact maximum.
func (s *Snapshot) Quantile(q float64) time.Duration {
	if s.count == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	if q == 1 {
		return time.Duration(s.max)
	}
	rank := max(uint64(math.Ceil(q*float64(s.count))), 1)
	var seen uint64
	for i, c := range s.counts {
		seen += c
		if seen >= rank {
			lo, w := bounds(i)
			mid := lo + (w-1)/2
			return time.Duration(min(max(mid, s.min), s.max))
		}
	}
	return time.Duration(s.max)
}

// Summary is a histogram's usual statistics in milliseconds, for reports.
type Summary struct {
	Count uint64  `json:"count"`
	Min   float64 `json:"min_ms"`
	Avg   float64 `json:"avg_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// Summary returns s's statistics.
func (s *Snapshot) Summary() Summary {
	return Summary{
		Count: s.count,
		Min:   ms(s.Min()), Avg: ms(s.Mean()),
		P50: ms(s.Quantile(0.50)), P90: ms(s.Quantile(0.90)), P95: ms(s.Quantile(0.95)), P99: ms(s.Quantile(0.99)),
		Max: ms(s.Max()),
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
