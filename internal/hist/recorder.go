package hist

import (
	"math"
	"sync/atomic"
	"time"
)

// Recorder is a histogram that many goroutines may record into at once.
// The zero value is not usable; call NewRecorder.
type Recorder struct {
	counts [NumBuckets]atomic.Int64
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

// Record adds one value (negative values count as 0). It never allocates.
func (r *Recorder) Record(d time.Duration) {
	v := max(int64(d), 0)
	r.counts[Bucket(d)-MinBucket].Add(1)
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
	counts Dense
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
	s.counts.Add(d)
	s.count++
	s.sum += v
	s.min, s.max = min(s.min, v), max(s.max, v)
}

// Merge adds o's values to s.
func (s *Snapshot) Merge(o *Snapshot) {
	s.counts.Merge(&o.counts, 1)
	s.count += o.count
	s.sum += o.sum
	s.min, s.max = min(s.min, o.min), max(s.max, o.max)
}

// Sub returns the values recorded in s but not in prev, an earlier snapshot
// of the same recorder. Its extremes are the values of the lowest and
// highest buckets that changed, clamped to s's exact ones: accurate within
// RelativeError.
func (s *Snapshot) Sub(prev *Snapshot) *Snapshot {
	d := New()
	d.counts = s.counts
	d.counts.Merge(&prev.counts, -1)
	for k := range d.counts.All() {
		v := int64(Value(k))
		d.min, d.max = min(d.min, v), max(d.max, v)
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
// RelativeError and clamped to the exact extremes; 0 when empty.
// Quantile(1) is the exact maximum.
func (s *Snapshot) Quantile(q float64) time.Duration {
	if s.count == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	if q == 1 {
		return time.Duration(s.max)
	}
	k, _ := quantile(q, int64(s.count), s.counts.All())
	return time.Duration(min(max(int64(Value(k)), s.min), s.max))
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
