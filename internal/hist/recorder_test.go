package hist

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// exact returns the value of rank ⌈q·n⌉ in sorted.
func exact(sorted []time.Duration, q float64) time.Duration {
	rank := max(int(math.Ceil(q*float64(len(sorted)))), 1)
	return sorted[rank-1]
}

// within reports whether got is within the histogram's error of want (and
// a nanosecond: a bucket's value is truncated to whole nanoseconds).
func within(got, want time.Duration) bool {
	return math.Abs(float64(got-want)) <= RelativeError*float64(want)+1
}

func TestQuantilesOfKnownDistributions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 200_000
	dists := []struct {
		name   string
		sample func(i int) time.Duration
	}{
		{"uniform 1µs..1s", func(int) time.Duration { return time.Microsecond + time.Duration(rng.Int64N(int64(time.Second))) }},
		{"exponential mean 50ms", func(int) time.Duration { return time.Duration(rng.ExpFloat64() * float64(50*time.Millisecond)) }},
		{"lognormal median 50ms σ 0.25", func(int) time.Duration {
			return time.Duration(float64(50*time.Millisecond) * math.Exp(0.25*rng.NormFloat64()))
		}},
		{"constant 76ms", func(int) time.Duration { return 76 * time.Millisecond }},
		{"small values", func(i int) time.Duration { return time.Duration(i % 200) }},
	}
	for _, d := range dists {
		t.Run(d.name, func(t *testing.T) {
			r := NewRecorder()
			values := make([]time.Duration, n)
			for i := range values {
				values[i] = d.sample(i)
				r.Record(values[i])
			}
			slices.Sort(values)
			s := r.Snapshot()
			if s.Count() != n {
				t.Fatalf("Count = %d, want %d", s.Count(), n)
			}
			if s.Min() != values[0] || s.Max() != values[n-1] {
				t.Errorf("Min, Max = %v, %v, want exact %v, %v", s.Min(), s.Max(), values[0], values[n-1])
			}
			var sum time.Duration
			for _, v := range values {
				sum += v
			}
			if got, want := s.Mean(), sum/n; got-want > 1 || want-got > 1 {
				t.Errorf("Mean = %v, want %v", got, want)
			}
			for _, q := range []float64{0, 0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1} {
				if got, want := s.Quantile(q), exact(values, q); !within(got, want) {
					t.Errorf("Quantile(%v) = %v, want %v within %.2f%%", q, got, want, 100*RelativeError)
				}
			}
		})
	}
}

func TestQuantilesAgainstTheory(t *testing.T) {
	// The histogram's answer for a large sample is near the distribution's
	// own quantile (sampling error dominates, so allow 2 %).
	rng := rand.New(rand.NewPCG(3, 4))
	mean := 50 * time.Millisecond
	s := New()
	for range 400_000 {
		s.Record(time.Duration(rng.ExpFloat64() * float64(mean)))
	}
	for _, q := range []float64{0.5, 0.9, 0.95, 0.99} {
		want := -math.Log(1-q) * float64(mean)
		if got := float64(s.Quantile(q)); math.Abs(got-want) > 0.02*want {
			t.Errorf("exponential Quantile(%v) = %v, want %v ± 2%%", q, time.Duration(got), time.Duration(want))
		}
	}
	u := New()
	for v := 1; v <= 1_000_000; v++ {
		u.Record(time.Duration(v) * time.Microsecond)
	}
	for _, q := range []float64{0.5, 0.95, 0.99} {
		want := time.Duration(q*1_000_000) * time.Microsecond
		if got := u.Quantile(q); !within(got, want) {
			t.Errorf("uniform Quantile(%v) = %v, want %v", q, got, want)
		}
	}
}

func TestEmpty(t *testing.T) {
	s := NewRecorder().Snapshot()
	if s.Count() != 0 || s.Min() != 0 || s.Max() != 0 || s.Mean() != 0 || s.Quantile(0.5) != 0 {
		t.Errorf("empty snapshot: count %d min %v max %v mean %v p50 %v, want all zero",
			s.Count(), s.Min(), s.Max(), s.Mean(), s.Quantile(0.5))
	}
	if got := s.Summary(); got != (Summary{}) {
		t.Errorf("empty Summary = %+v, want zero", got)
	}
}

func TestMergeEqualsWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	a, b, whole := New(), New(), New()
	for i := range 100_000 {
		v := time.Duration(rng.ExpFloat64() * float64(time.Millisecond))
		whole.Record(v)
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	a.Merge(b)
	if *a != *whole {
		t.Fatalf("merged halves differ from the whole: %+v vs %+v", a.Summary(), whole.Summary())
	}
	a.Merge(New()) // merging an empty histogram changes nothing
	if *a != *whole {
		t.Fatal("merging an empty histogram changed the result")
	}
}

func TestSubGivesTheInterval(t *testing.T) {
	r := NewRecorder()
	for range 1000 {
		r.Record(10 * time.Millisecond)
	}
	before := r.Snapshot()
	for range 500 {
		r.Record(200 * time.Millisecond)
	}
	d := r.Snapshot().Sub(before)
	if d.Count() != 500 {
		t.Fatalf("interval count = %d, want 500", d.Count())
	}
	if got := d.Quantile(0.5); !within(got, 200*time.Millisecond) {
		t.Errorf("interval p50 = %v, want 200ms (the earlier 10ms values excluded)", got)
	}
	if got := d.Mean(); got != 200*time.Millisecond {
		t.Errorf("interval mean = %v, want 200ms", got)
	}
	if !within(d.Min(), 200*time.Millisecond) || !within(d.Max(), 200*time.Millisecond) || d.Max() > 200*time.Millisecond {
		t.Errorf("interval min, max = %v, %v, want 200ms within the error, the max at most the overall max", d.Min(), d.Max())
	}
}

func TestRecorderConcurrent(t *testing.T) {
	r := NewRecorder()
	const workers, each = 8, 20_000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	snaps := make(chan uint64, 1)
	go func() { // snapshots while recording: counts only grow
		var last uint64
		for {
			select {
			case <-stop:
				snaps <- last
				return
			default:
			}
			s := r.Snapshot()
			if s.Count() < last {
				t.Errorf("count went back from %d to %d", last, s.Count())
			}
			if total := uint64(s.counts.Total()); total < s.Count() {
				t.Errorf("bucket total %d below count %d", s.counts.Total(), s.Count())
			}
			last = s.Count()
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r.Record(time.Duration(w*each+i) * time.Microsecond)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-snaps
	s := r.Snapshot()
	if s.Count() != workers*each {
		t.Fatalf("Count = %d, want %d", s.Count(), workers*each)
	}
	if s.Min() != 0 || s.Max() != time.Duration(workers*each-1)*time.Microsecond {
		t.Errorf("Min, Max = %v, %v", s.Min(), s.Max())
	}
}

// BenchmarkRecordSerial: one goroutine, so the cost of finding the bucket
// (a math.Log) is not hidden behind contention on the counters.
func BenchmarkRecordSerial(b *testing.B) {
	r := NewRecorder()
	v := time.Millisecond
	for b.Loop() {
		r.Record(v)
		v += 7919
	}
}

func BenchmarkRecord(b *testing.B) {
	r := NewRecorder()
	b.RunParallel(func(pb *testing.PB) {
		v := time.Millisecond
		for pb.Next() {
			r.Record(v)
			v += 7919
		}
	})
}
