package hist_test

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"usher/internal/analytics"
	"usher/internal/analytics/analyticstest"
	"usher/internal/analytics/sqliteanalytics"
	"usher/internal/event"
	"usher/internal/hist"
	"usher/internal/queue/control"
)

// TestUsersAgree: the same times give the same quantiles through the
// three users of the histogram, each through its own storage: analytics
// (counted events into SQL rows over two minutes, merged by its report),
// the adaptive controller (Signals through its store fields, as in Redis)
// and the load lab (a Recorder's snapshot). Some times are under 1 ms.
func TestUsersAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	values := make([]time.Duration, 3000)
	for i := range values {
		median := 2 * time.Second
		if i%10 == 0 {
			median = 400 * time.Microsecond
		}
		values[i] = time.Duration(float64(median) * math.Exp(rng.NormFloat64()))
	}

	ctx := context.Background()
	store, err := sqliteanalytics.Open(ctx, filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	a := analytics.New(store, analytics.Options{})
	t0 := analyticstest.Base()
	var evs []event.Event
	for i := 0; i < len(values); i += 100 {
		d := event.Data{Waits: 100}
		h := hist.Counts{} // as the queue counts its times in queue
		for _, v := range values[i : i+100] {
			h.Add(v)
			d.WaitSumMS += v.Milliseconds()
		}
		d.WaitHist = h
		at := t0.Add(time.Duration(i) * 40 * time.Millisecond) // 2 minutes
		evs = append(evs, analyticstest.Ev("c"+strconv.Itoa(i), event.Counted, "r", at, "", &d))
	}
	if _, err := a.Apply(ctx, evs); err != nil {
		t.Fatal(err)
	}
	rep, err := a.Report(ctx, "r", t0, t0.Add(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Minutes) != 2 {
		t.Fatalf("%d minutes, want 2", len(rep.Minutes))
	}

	var sig control.Signals
	rec := hist.NewRecorder()
	for _, v := range values {
		sig.Add(v, false)
		rec.Record(v)
	}
	var pooled control.Signals
	pairs := sig.SignalPairs()
	for i := 0; i < len(pairs); i += 2 {
		n, err := strconv.ParseInt(pairs[i+1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		pooled.SetSignal(pairs[i], n)
	}
	snap := rec.Snapshot()

	d := rep.Totals.Derived
	for _, c := range []struct {
		q         float64
		analytics int64
	}{{0.05, -1}, {0.5, d.WaitP50MS}, {0.9, d.WaitP90MS}, {0.99, d.WaitP99MS}} {
		ctl, lab := pooled.Quantile(c.q), snap.Quantile(c.q)
		if ctl != lab {
			t.Errorf("q %v: controller %v, load lab %v; want the same", c.q, ctl, lab)
		}
		if c.analytics >= 0 && c.analytics != ctl.Milliseconds() {
			t.Errorf("q %v: analytics %d ms, controller %v; want the same", c.q, c.analytics, ctl)
		}
	}
	if q := pooled.Quantile(0.05); q >= time.Millisecond {
		t.Errorf("p5 = %v, want under 1 ms: the sub-millisecond buckets are not used", q)
	}
}
