package analytics

import (
	"math"
	"slices"
	"time"
)

// Hist is a histogram of durations in fixed logarithmic buckets (the
// DDSketch idea): bucket k ≥ 1 holds the values in (γ^(k-1), γ^k]
// milliseconds, bucket 0 the values under one millisecond. The boundaries
// never move, so two histograms merge exactly by adding counts: a quantile of
// a range of minutes is the quantile of every sample of the range, not an
// average of per-minute quantiles. A bucket's value is its midpoint
// 2γ^k/(γ+1), within RelativeError of every sample in it, so a quantile is
// off by at most RelativeError of its true value (plus nothing for the
// merge). The key is the bucket, the value its count; empty buckets are
// absent.
type Hist map[int]int64

// Gamma is the ratio of a bucket's upper to its lower bound.
const Gamma = 1.04

// RelativeError bounds a quantile's error relative to its true value.
const RelativeError = (Gamma - 1) / (Gamma + 1) // ≈ 2 %

// MaxBucket is the largest bucket: waits longer than γ^MaxBucket ms (about
// 40 days) are counted in it.
const MaxBucket = 700

var logGamma = math.Log(Gamma)

// Bucket returns the bucket of d.
func Bucket(d time.Duration) int {
	ms := float64(d) / float64(time.Millisecond)
	if ms < 1 {
		return 0
	}
	k := int(math.Ceil(math.Log(ms) / logGamma))
	return max(1, min(k, MaxBucket))
}

// BucketValue is the duration a bucket stands for: its midpoint.
func BucketValue(k int) time.Duration {
	if k <= 0 {
		return 0
	}
	return time.Duration(2 * math.Pow(Gamma, float64(k)) / (Gamma + 1) * float64(time.Millisecond))
}

// Add counts one sample.
func (h Hist) Add(d time.Duration) { h[Bucket(d)]++ }

// Merge adds o's counts to h.
func (h Hist) Merge(o Hist) {
	for k, n := range o {
		h[k] += n
	}
}

// Count is the number of samples.
func (h Hist) Count() int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	return n
}

// Quantile returns the q-quantile (0 < q ≤ 1) by nearest rank: the value of
// the bucket that holds the ⌈q·n⌉-th smallest sample; 0 when h is empty.
func (h Hist) Quantile(q float64) time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := max(1, int64(math.Ceil(q*float64(n))))
	keys := make([]int, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var seen int64
	for _, k := range keys {
		seen += h[k]
		if seen >= rank {
			return BucketValue(k)
		}
	}
	return BucketValue(keys[len(keys)-1])
}
