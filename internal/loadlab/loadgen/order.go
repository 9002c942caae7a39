package loadgen

import (
	"math"
	"slices"
	"sort"
	"time"

	"usher/internal/hist"
)

// inversions counts visitors certainly overtaken: visitor i entered before
// visitor j started entering (i's enter answered before j's was sent), yet
// usher still told i "waiting" in answer to a poll sent after j had been
// told "admitted". Client clocks only order calls that did not overlap, so
// this never counts a false inversion; it may miss one hidden by overlap or
// by the poll interval.
func inversions(visits []visit) int64 {
	var adm []visit
	for _, v := range visits {
		if !v.admittedAt.IsZero() {
			adm = append(adm, v)
		}
	}
	slices.SortFunc(adm, func(a, b visit) int { return a.admittedAt.Compare(b.admittedAt) })
	// latestEntry[k] is the latest enter start among the first k+1 admitted.
	latestEntry := make([]time.Time, len(adm))
	for k, v := range adm {
		latestEntry[k] = v.enterSend
		if k > 0 && latestEntry[k-1].After(v.enterSend) {
			latestEntry[k] = latestEntry[k-1]
		}
	}
	var n int64
	for _, v := range visits {
		if v.lastWaiting.IsZero() {
			continue
		}
		// Visitors told "admitted" before v's last "waiting" poll was sent.
		k := sort.Search(len(adm), func(k int) bool { return !adm[k].admittedAt.Before(v.lastWaiting) })
		if k > 0 && latestEntry[k-1].After(v.enterRecv) {
			n++
		}
	}
	return n
}

// ETAError compares the wait usher predicted at entry (eta_seconds and
// eta_range_seconds) with the wait the visitor saw (entry to the first
// "admitted" answer), for visitors who waited. The observed wait is late by
// up to one poll interval; usher's ETA counts half of one.
type ETAError struct {
	Count int64 `json:"count"`
	// MeanSeconds is the mean of actual − predicted: positive when visitors
	// waited longer than told.
	MeanSeconds float64 `json:"mean_s"`
	// P50AbsSeconds and P90AbsSeconds are percentiles of |actual − predicted|.
	P50AbsSeconds float64 `json:"p50_abs_s"`
	P90AbsSeconds float64 `json:"p90_abs_s"`
	// P50Relative and P90Relative are percentiles of the relative error
	// |actual − predicted| ÷ actual.
	P50Relative float64 `json:"p50_rel"`
	P90Relative float64 `json:"p90_rel"`
	// Ranged counts the visitors told a range (eta_range_seconds), and
	// Coverage is the share of them admitted inside it; nil when usher
	// sent no range.
	Ranged   int64    `json:"ranged"`
	Coverage *float64 `json:"range_coverage,omitempty"`
	// MeanRangeSeconds is the ranges' mean width (high − low): a range
	// covers more the wider it is.
	MeanRangeSeconds float64 `json:"mean_range_s,omitempty"`
	// MeanPredictedSeconds and MeanActualSeconds put the error in scale.
	MeanPredictedSeconds float64 `json:"mean_predicted_s"`
	MeanActualSeconds    float64 `json:"mean_actual_s"`
}

func etaError(visits []visit) *ETAError {
	abs := hist.New()
	var e ETAError
	var sum, pred, act float64
	var rel []float64
	var inside int64
	var width float64
	for _, v := range visits {
		if v.admittedAt.IsZero() || !v.waitedAtEntry {
			continue
		}
		actual := v.admittedAt.Sub(v.enterRecv).Seconds()
		diff := actual - float64(v.etaSeconds)
		e.Count++
		sum += diff
		pred += float64(v.etaSeconds)
		act += actual
		abs.Record(time.Duration(math.Abs(diff) * float64(time.Second)))
		if actual > 0 {
			rel = append(rel, math.Abs(diff)/actual)
		}
		if r := v.etaRange; r != [2]int64{} {
			e.Ranged++
			width += float64(r[1] - r[0])
			if float64(r[0]) <= actual && actual <= float64(r[1]) {
				inside++
			}
		}
	}
	if e.Count == 0 {
		return nil
	}
	n := float64(e.Count)
	e.MeanSeconds, e.MeanPredictedSeconds, e.MeanActualSeconds = sum/n, pred/n, act/n
	e.P50AbsSeconds, e.P90AbsSeconds = abs.Quantile(0.5).Seconds(), abs.Quantile(0.9).Seconds()
	slices.Sort(rel)
	e.P50Relative, e.P90Relative = quantile(rel, 0.5), quantile(rel, 0.9)
	if e.Ranged > 0 {
		c := float64(inside) / float64(e.Ranged)
		e.Coverage, e.MeanRangeSeconds = &c, width/float64(e.Ranged)
	}
	return &e
}

// quantile is the nearest-rank q-quantile of sorted xs (0 when empty: the
// report is JSON, which has no NaN).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return xs[max(0, int(math.Ceil(q*float64(len(xs))))-1)]
}
