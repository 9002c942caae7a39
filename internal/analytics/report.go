package analytics

import (
	"context"
	"time"

	"usher/internal/event"
	"usher/internal/hist"
)

// MaxRange is the longest from/to range a Report covers.
const MaxRange = 31 * 24 * time.Hour

// Page sizes of a timeline.
const (
	DefaultEvents = 100
	MaxEvents     = 500
)

// Row is one minute of a Report, as the API answers it.
type Row struct {
	At time.Time `json:"at"`
	Counts
	Derived
}

// Derived are the figures computed from the counts and the histogram.
type Derived struct {
	// Conversion is confirmed reservations ÷ admissions (0 without
	// admissions).
	Conversion float64 `json:"conversion"`
	// Waited is how many admissions have a time in queue; the quantiles
	// and the mean are theirs, in milliseconds, within RelativeError.
	Waited    int64 `json:"waited"`
	WaitP50MS int64 `json:"wait_p50_ms"`
	WaitP90MS int64 `json:"wait_p90_ms"`
	WaitP99MS int64 `json:"wait_p99_ms"`
	WaitAvgMS int64 `json:"wait_avg_ms"`
	// ETAs is how many admissions had a forecast; the ETA error is their
	// wait less the forecast: mean (bias; > 0 means the wait was longer
	// than forecast) and mean absolute, in milliseconds.
	ETAs           int64 `json:"etas"`
	ETAErrorAvgMS  int64 `json:"eta_error_avg_ms"`
	ETAAbsErrAvgMS int64 `json:"eta_abs_error_avg_ms"`
}

func derive(c Counts, h hist.Counts) Derived {
	d := Derived{Waited: c.Waits, ETAs: c.ETAs}
	if c.Admissions > 0 {
		d.Conversion = float64(c.Confirmed) / float64(c.Admissions)
	}
	if c.Waits > 0 {
		d.WaitP50MS = h.Quantile(0.50).Milliseconds()
		d.WaitP90MS = h.Quantile(0.90).Milliseconds()
		d.WaitP99MS = h.Quantile(0.99).Milliseconds()
		d.WaitAvgMS = c.WaitSumMS / c.Waits
	}
	if c.ETAs > 0 {
		d.ETAErrorAvgMS = c.ETAErrSumMS / c.ETAs
		d.ETAAbsErrAvgMS = c.ETAAbsErrSumMS / c.ETAs
	}
	return d
}

// Report is a room's analytics over [From, To): its minutes that saw an
// event, oldest first, and the range's totals (the quantiles of every
// time in queue of the range, from the merged histograms).
type Report struct {
	Room    string    `json:"room"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Minutes []Row     `json:"minutes"`
	Totals  Row       `json:"totals"`
}

// Report reads room's analytics over [from, to): both are cut to the
// minute; to must be after from and at most MaxRange later.
func (a *Analytics) Report(ctx context.Context, room string, from, to time.Time) (Report, error) {
	from, to = from.UTC().Truncate(time.Minute), to.UTC().Truncate(time.Minute)
	switch {
	case !to.After(from):
		return Report{}, ErrInvalid.Detail("to: want a time at least a minute after from")
	case to.Sub(from) > MaxRange:
		return Report{}, ErrInvalid.Detail("from, to: want at most %d days apart", int(MaxRange/(24*time.Hour)))
	}
	ms, err := a.s.Minutes(ctx, room, from, to)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Room: room, From: from, To: to, Minutes: make([]Row, 0, len(ms))}
	var total Counts
	all := hist.Counts{}
	for _, m := range ms {
		rep.Minutes = append(rep.Minutes, Row{At: m.At.UTC(), Counts: m.Counts, Derived: derive(m.Counts, m.Wait)})
		total.add(m.Counts)
		all.Merge(m.Wait)
	}
	rep.Totals = Row{At: from, Counts: total, Derived: derive(total, all)}
	return rep, nil
}

// Events returns room's timeline: at most limit (1 to MaxEvents) events
// older than before (0: the newest), newest first, and the position to
// pass as before for the next page (0 on the last page).
func (a *Analytics) Events(ctx context.Context, room string, before int64, limit int) ([]event.Event, int64, error) {
	if limit < 1 || limit > MaxEvents {
		return nil, 0, ErrInvalid.Detail("limit: want 1 to %d", MaxEvents)
	}
	if before < 0 {
		return nil, 0, ErrInvalid.Detail("before: not a cursor of this list")
	}
	got, err := a.s.Events(ctx, room, before, limit+1)
	if err != nil {
		return nil, 0, err
	}
	var next int64
	if len(got) > limit {
		got = got[:limit]
		next = got[limit-1].Seq
	}
	out := make([]event.Event, len(got))
	for i, s := range got {
		out[i] = s.Event
	}
	return out, next, nil
}
