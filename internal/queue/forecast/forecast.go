// Package forecast tells a waiting visitor when its turn comes and when to
// ask again: rates measured from a room's counters (Rates), the wait they
// forecast at a place in line (Rates.Forecast), the near zone at the head
// of the line (Near) and the poll pacing (Pace).
//
// It is pure arithmetic over what the caller read: no clock, no store, no
// locks. Limits: the rates are those of one room's counters as one
// instance reads them; a forecast assumes the rates hold over the wait
// (the range covers their measured variance, not a change the operator
// makes), and it is capped at a day. The model is in
// docs/architecture.md#eta.
package forecast

import (
	"math"
	"time"
)

// The estimator. Each measurement takes, from the room's counters alone,
//
//	admitted = ΔAdmitted
//	entered  = ΔIssued
//	left     ≈ entered − admitted − ΔWaiting (never below 0)
//
// and keeps, for the admission rate μ and the rate L at which waiting
// visitors leave the line, an EWMA (time constant 10 s) and the variance of
// their values over windows of at least a second and two steps (an EWMA of
// the squared deviation from the mean, time constant 30 s). A visitor at
// position p waits until p places ahead of it (its own included) are gone:
// the head's admissions take μ a second, and each of the a(t) visitors
// still ahead leaves at the per-visitor rate h = L ÷ waiting, so
//
//	da/dt = −μ − h·a   ⇒   T = ln(1 + h·p/μ) ÷ h   (p ÷ μ when h = 0),
//
// plus half a near-zone poll interval by which the visitor's next poll sees
// the admission. The range takes μ and h a z = 1.645 standard deviation (a
// 90 % normal range) of their means over the horizon T apart (variance
// over windows of w seconds, averaged over T seconds: var × w ÷ T) and
// widens by half a step each way and a near-zone poll interval at the top.
const (
	// rateTimeConstant is the time constant of the rates' EWMA, in seconds.
	rateTimeConstant = 10
	// varTimeConstant is that of their variances: a change of rate shows
	// as a wider range for about half a minute.
	varTimeConstant = 30
	// minWindow is the shortest window the variances are measured over.
	minWindow = time.Second
	// etaZ is the normal quantile of the range's ends: 5 % below, 5 % above.
	etaZ = 1.645
	// pollLate is the mean delay between an admission and the poll that
	// sees it: half the near zone's poll interval.
	pollLate = FastPoll / 2
	// pollLateMax is the longest such delay (FastPoll + 20 % jitter).
	pollLateMax = FastPoll * 6 / 5
	// MaxETA caps every estimate.
	MaxETA = 24 * time.Hour
)

// Rates are a room's measured rates. Rate is the admission rate in
// visitors a second, Leave the rate at which waiting visitors leave the
// line; RateVar and LeaveVar their variances over windows of at least a
// second. The zero value has measured nothing; the caller may set Rate
// (the rate in force, when it starts or changes).
type Rates struct {
	Rate, RateVar, Leave, LeaveVar float64
	win                            window
}

// window accumulates one measuring window of the variances.
type window struct {
	start          time.Time
	admitted, left float64
	// last is the length of the last closed window, in seconds.
	last float64
}

// Counts are what one reading of a room gives the estimator.
type Counts struct {
	At time.Time
	// Admitted counts the room's admissions ever, Issued its places ever
	// given (the last sequence number), Waiting its line now.
	Admitted, Issued, Waiting int64
	// Drawn is whether the room's opening draw is done.
	Drawn bool
}

// Measure updates r from the reading prev to the reading cur, taken while
// someone waited at prev; step is the room's admission interval (a
// variance window spans at least two).
func (r *Rates) Measure(prev, cur Counts, step time.Duration) {
	dt := cur.At.Sub(prev.At).Seconds()
	if dt <= 0 {
		return
	}
	admitted := float64(cur.Admitted - prev.Admitted)
	if admitted < 0 { // the store lost the room's counters
		r.win = window{start: cur.At}
		return
	}
	left := 0.0
	if cur.Drawn == prev.Drawn {
		// An opening draw assigns places to visitors already counted as
		// waiting, which would read as arrivals that left: the reading that
		// sees it measures no leaving.
		left = max(0, float64(cur.Issued-prev.Issued)-admitted-float64(cur.Waiting-prev.Waiting))
	}
	a := 1 - math.Exp(-dt/rateTimeConstant)
	r.Rate += a * (admitted/dt - r.Rate)
	r.Leave += a * (left/dt - r.Leave)

	if r.win.start.IsZero() {
		r.win.start = prev.At
	}
	r.win.admitted += admitted
	r.win.left += left
	w := cur.At.Sub(r.win.start)
	if w < max(minWindow, 2*step) {
		return
	}
	ws := w.Seconds()
	b := 1 - math.Exp(-ws/varTimeConstant)
	dr, dl := r.win.admitted/ws-r.Rate, r.win.left/ws-r.Leave
	r.RateVar += b * (dr*dr - r.RateVar)
	r.LeaveVar += b * (dl*dl - r.LeaveVar)
	r.win = window{start: cur.At, last: ws}
}

// Rest restarts the measuring window at: nobody waited, so nothing was
// measured.
func (r *Rates) Rest(at time.Time) { r.win = window{start: at, last: r.win.last} }

// Forecast is the predicted wait of a visitor at a place in line: ETA, the
// best estimate, and the range [Low, High] that should hold the actual
// wait nine times in ten.
type Forecast struct {
	ETA, Low, High time.Duration
}

// Forecast predicts the wait of a visitor at position (1 at the head) of a
// line of waiting visitors, from the measured admission rate (at least
// floor, so that a stalled or paused room shows a long wait rather than
// none), the measured leaving ahead, and their variances; step is the
// room's admission interval. Capped at MaxETA.
func (r Rates) Forecast(position, waiting int64, floor float64, step time.Duration) Forecast {
	mu := max(r.Rate, floor)
	n := float64(max(position, 1))
	h := 0.0
	if waiting > 0 {
		h = max(0, r.Leave) / float64(waiting)
	}
	t := drain(n, mu, h)
	// The spread of the mean rates over the horizon: windows of w seconds
	// averaged over t seconds.
	w := max(r.win.last, minWindow.Seconds())
	share := min(1, w/max(t, w))
	sdMu := math.Sqrt(r.RateVar * share)
	sdH := 0.0
	if waiting > 0 {
		sdH = math.Sqrt(r.LeaveVar*share) / float64(waiting)
	}
	lo := drain(n, mu+etaZ*sdMu, h+etaZ*sdH)
	hi := drain(n, max(floor, mu-etaZ*sdMu), max(0, h-etaZ*sdH))
	half := step.Seconds() / 2
	return Forecast{
		ETA:  seconds(t + pollLate.Seconds()),
		Low:  seconds(max(0, lo-half)),
		High: seconds(hi + half + pollLateMax.Seconds()),
	}
}

// drain is the time until n places ahead are gone when the head admits mu
// a second and each waiting visitor leaves at rate h: ln(1 + h·n/mu) ÷ h.
func drain(n, mu, h float64) float64 {
	if x := h * n / mu; x > 1e-9 {
		return math.Log1p(x) / h
	}
	return n / mu
}

func seconds(s float64) time.Duration {
	return time.Duration(min(s, MaxETA.Seconds()) * float64(time.Second))
}
