package hist

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestBucketHoldsItsValues: a value lies in (γ^(k−1), γ^k] ms of its bucket
// k, and the bucket's value is within RelativeError of it; buckets clamp to
// [MinBucket, MaxBucket].
func TestBucketHoldsItsValues(t *testing.T) {
	for _, d := range []time.Duration{1, 2, 7, 255, 256, time.Microsecond, 999 * time.Microsecond, time.Millisecond,
		1001 * time.Microsecond, 76 * time.Millisecond, 11 * time.Second, 40 * 24 * time.Hour} {
		k := Bucket(d)
		ms := float64(d) / float64(time.Millisecond)
		lo, hi := math.Pow(Gamma, float64(k-1)), math.Pow(Gamma, float64(k))
		if ms <= lo*(1-1e-12) || ms > hi*(1+1e-12) {
			t.Errorf("%v: bucket %d is (%g, %g] ms, want it inside", d, k, lo, hi)
		}
		if v := Value(k); math.Abs(float64(v-d)) > RelativeError*float64(d)+1 {
			t.Errorf("%v: bucket %d stands for %v, want within %.1f %%", d, k, v, 100*RelativeError)
		}
	}
	for _, c := range []struct {
		d    time.Duration
		want int
	}{{0, MinBucket}, {-time.Second, MinBucket}, {1, MinBucket + 1}, {100 * 365 * 24 * time.Hour, MaxBucket}} {
		if got := Bucket(c.d); got != c.want {
			t.Errorf("Bucket(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

// TestStoredBucketsKeepTheirMeaning: from 1 ms up (1 ms itself aside) a
// value falls in the bucket analytics' own formula gave it before this
// package, so the SQL rows written then still read right.
func TestStoredBucketsKeepTheirMeaning(t *testing.T) {
	old := func(d time.Duration) int { // analytics.Bucket until the layouts were one
		ms := float64(d) / float64(time.Millisecond)
		if ms < 1 {
			return 0
		}
		return max(1, min(int(math.Ceil(math.Log(ms)/math.Log(1.04))), 700))
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 100_000 {
		d := time.Millisecond + 1 + time.Duration(math.Exp(rng.Float64()*math.Log(1e16)))
		if got, want := Bucket(d), old(d); got != want {
			t.Fatalf("Bucket(%v) = %d, want %d as stored before", d, got, want)
		}
	}
	if Bucket(11*time.Second) != 238 || Bucket(70*time.Second) != 285 {
		t.Errorf("Bucket(11 s), Bucket(70 s) = %d, %d; want 238, 285", Bucket(11*time.Second), Bucket(70*time.Second))
	}
}

// TestCountsAndDenseAgree: the sparse and the dense histogram of the same
// values answer the same quantiles, within RelativeError of the exact ones.
func TestCountsAndDenseAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	c, d := Counts{}, &Dense{}
	values := make([]time.Duration, 0, 5000)
	for range cap(values) {
		v := time.Duration(float64(300*time.Microsecond) * math.Exp(2*rng.NormFloat64()))
		c.Add(v)
		d.Add(v)
		values = append(values, v)
	}
	slices.Sort(values)
	for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.95, 0.99, 1} {
		got := c.Quantile(q)
		if dq := d.Quantile(q); dq != got {
			t.Errorf("Quantile(%v): Counts %v, Dense %v", q, got, dq)
		}
		want := values[max(1, int(math.Ceil(q*float64(len(values)))))-1]
		if math.Abs(float64(got-want)) > RelativeError*float64(want)+1 {
			t.Errorf("Quantile(%v) = %v, want %v within %.1f %%", q, got, want, 100*RelativeError)
		}
	}
	if c.Total() != int64(len(values)) || d.Total() != int64(len(values)) {
		t.Errorf("totals %d, %d; want %d", c.Total(), d.Total(), len(values))
	}
	if (Counts{}).Quantile(0.5) != 0 || (&Dense{}).Quantile(0.5) != 0 {
		t.Error("an empty histogram's quantile is not 0")
	}
}

// TestMergeAndSet: Counts.Merge adds only positive counts, in buckets
// clamped to the layout; Dense.Merge subtracts exactly; Dense.Set refuses a
// bucket outside the layout.
func TestMergeAndSet(t *testing.T) {
	h := Counts{5: 1}
	if n := h.Merge(Counts{5: 2, 9: -4, 10: 0, MaxBucket + 50: 1, MinBucket - 1: 3}); n != 6 {
		t.Errorf("Merge added %d, want 6", n)
	}
	if want := (Counts{5: 3, MaxBucket: 1, MinBucket: 3}); len(h) != len(want) || h[5] != 3 || h[MaxBucket] != 1 || h[MinBucket] != 3 {
		t.Errorf("after Merge: %v, want %v", h, want)
	}
	var a, b Dense
	a.Add(time.Second)
	b.Add(time.Hour)
	sum := a
	sum.Merge(&b, 1)
	sum.Merge(&b, -1)
	if sum != a {
		t.Error("Merge(o, 1) then Merge(o, -1) did not give back the histogram")
	}
	if a.Set(MinBucket-1, 1) || a.Set(MaxBucket+1, 1) || !a.Set(-5, 2) || a[-5-MinBucket] != 2 {
		t.Error("Set accepts a bucket outside the layout, or refuses one inside")
	}
}

// BenchmarkBucket: the cost of finding a value's bucket, a math.Log.
func BenchmarkBucket(b *testing.B) {
	v := time.Millisecond
	var sink int
	for b.Loop() {
		sink += Bucket(v)
		v += 7919
	}
	_ = sink
}
