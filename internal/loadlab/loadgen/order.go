package loadgen

import (
	"math"
	"slices"
	"sort"
	"time"

	"usher/internal/loadlab/hist"
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

// ETAError compares the wait usher predicted at entry (eta_seconds) with
// the wait the visitor saw (entry to the first "admitted" answer), for
// visitors who waited. The observed wait is late by up to one poll interval.
type ETAError struct {
	Count int64 `json:"count"`
	// MeanSeconds is the mean of actual − predicted: positive when visitors
	// waited longer than told.
	MeanSeconds float64 `json:"mean_s"`
	// P50AbsSeconds and P90AbsSeconds are percentiles of |actual − predicted|.
	P50AbsSeconds float64 `json:"p50_abs_s"`
	P90AbsSeconds float64 `json:"p90_abs_s"`
	// MeanPredictedSeconds and MeanActualSeconds put the error in scale.
	MeanPredictedSeconds float64 `json:"mean_predicted_s"`
	MeanActualSeconds    float64 `json:"mean_actual_s"`
}

func etaError(visits []visit) *ETAError {
	abs := hist.New()
	var e ETAError
	var sum, pred, act float64
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
	}
	if e.Count == 0 {
		return nil
	}
	n := float64(e.Count)
	e.MeanSeconds, e.MeanPredictedSeconds, e.MeanActualSeconds = sum/n, pred/n, act/n
	e.P50AbsSeconds, e.P90AbsSeconds = abs.Quantile(0.5).Seconds(), abs.Quantile(0.9).Seconds()
	return &e
}
