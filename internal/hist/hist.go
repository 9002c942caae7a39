// Package hist is usher's one histogram of durations: fixed logarithmic
// buckets (the DDSketch idea) shared by the analytics, the adaptive
// controller and the load lab, so that histograms merge exactly by adding
// counts wherever they are kept.
//
// Bucket k holds the values in (γ^(k−1), γ^k] milliseconds, γ = 1.04, for k
// from MinBucket to MaxBucket. A bucket stands for its midpoint (Value),
// within RelativeError (≈ 2 %) of every value in it, so a quantile (nearest
// rank) is within that share of a value of its rank.
//
// Bucket numbers are stored (analytics' SQL rows, the controller's Redis
// fields), so the layout never changes. Counts (sparse), Dense (a fixed
// array) and Recorder with Snapshot (lock-free counters with the exact count,
// sum, min and max) keep them over the same layout.
package hist

import (
	"iter"
	"maps"
	"math"
	"slices"
	"time"
)

// Gamma is the ratio of a bucket's upper to its lower bound.
const Gamma = 1.04

// RelativeError bounds a quantile's error relative to its true value.
const RelativeError = (Gamma - 1) / (Gamma + 1)

const (
	// MinBucket is the lowest bucket: (0.96 ns, 1 ns] and every value below,
	// 0 and negative values included. (Buckets k ≥ 1 are those analytics
	// has always stored; its bucket 0, once "under 1 ms", reads as ≈ 1 ms.)
	MinBucket = -353
	// MaxBucket is the highest bucket: values over γ^MaxBucket ms (about 26
	// years) are counted in it.
	MaxBucket = 700
	// NumBuckets is the number of buckets.
	NumBuckets = MaxBucket - MinBucket + 1
)

var logGamma = math.Log(Gamma)

// Bucket returns the bucket of d.
func Bucket(d time.Duration) int {
	if d <= 0 {
		return MinBucket
	}
	k := int(math.Ceil(math.Log(float64(d)/float64(time.Millisecond)) / logGamma))
	return min(max(k, MinBucket), MaxBucket)
}

// Value is the duration bucket k stands for: its midpoint, 2γ^k/(γ+1) ms.
func Value(k int) time.Duration {
	return time.Duration(2 * math.Pow(Gamma, float64(k)) / (Gamma + 1) * float64(time.Millisecond))
}

// quantile returns the bucket of the value of rank ⌈q·n⌉ (at least 1, q
// clamped to [0, 1]) among n values whose buckets each yields in ascending
// order (counts ≤ 0 skipped); false when n ≤ 0. It is the quantile rule of
// every histogram.
func quantile(q float64, n int64, each iter.Seq2[int, int64]) (int, bool) {
	if n <= 0 {
		return 0, false
	}
	rank := max(1, int64(math.Ceil(min(max(q, 0), 1)*float64(n))))
	var seen int64
	last := MinBucket
	for k, c := range each {
		if c <= 0 {
			continue
		}
		seen += c
		last = k
		if seen >= rank {
			break
		}
	}
	return last, true
}

// Counts is a sparse histogram: bucket → count, empty buckets absent.
type Counts map[int]int64

// Add counts one value.
func (h Counts) Add(d time.Duration) { h[Bucket(d)]++ }

// Merge adds o's positive counts to h, each in its bucket clamped to
// [MinBucket, MaxBucket] (o may come from outside), and returns how many
// values it added.
func (h Counts) Merge(o Counts) int64 {
	var n int64
	for k, c := range o {
		if c > 0 {
			h[min(max(k, MinBucket), MaxBucket)] += c
			n += c
		}
	}
	return n
}

// Total is the number of values.
func (h Counts) Total() int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	return n
}

// Quantile returns the q-quantile by nearest rank; 0 when h is empty.
func (h Counts) Quantile(q float64) time.Duration {
	keys := slices.Sorted(maps.Keys(h))
	k, ok := quantile(q, h.Total(), func(yield func(int, int64) bool) {
		for _, k := range keys {
			if !yield(k, h[k]) {
				return
			}
		}
	})
	if !ok {
		return 0
	}
	return Value(k)
}

// Dense is a histogram as a fixed array (bucket k at index k − MinBucket):
// a value that copies, compares with == and adds without allocating.
type Dense [NumBuckets]int64

// Add counts one value.
func (h *Dense) Add(d time.Duration) { h[Bucket(d)-MinBucket]++ }

// Set sets bucket k's count; false, and nothing set, when there is no
// bucket k.
func (h *Dense) Set(k int, n int64) bool {
	if k < MinBucket || k > MaxBucket {
		return false
	}
	h[k-MinBucket] = n
	return true
}

// Merge adds o's counts to h, times sign (-1 subtracts them).
func (h *Dense) Merge(o *Dense, sign int64) {
	for i, c := range o {
		h[i] += sign * c
	}
}

// All yields the non-empty buckets and their counts, in ascending order.
func (h *Dense) All() iter.Seq2[int, int64] {
	return func(yield func(int, int64) bool) {
		for i, c := range h {
			if c != 0 && !yield(i+MinBucket, c) {
				return
			}
		}
	}
}

// Total is the number of values.
func (h *Dense) Total() int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	return n
}

// Quantile returns the q-quantile by nearest rank; 0 when h is empty.
func (h *Dense) Quantile(q float64) time.Duration {
	k, ok := quantile(q, h.Total(), h.All())
	if !ok {
		return 0
	}
	return Value(k)
}
