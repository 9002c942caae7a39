package queue

import (
	"math"
	"strconv"
	"sync"
	"time"
)

// The ETA (docs/architecture.md#eta). Each view refresh measures, from
// the room's counters alone (no store change):
//
//	admitted = ΔAdmittedTotal
//	entered  = ΔLastSeq
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
// plus the half poll interval by which the visitor's next poll sees the
// admission. The range takes μ and h a z = 1.645 standard deviation
// (a 90 % normal range) of their means over the horizon T apart — variance
// over windows of w seconds, averaged over T seconds: var × w ÷ T — and
// widens by half a step each way and a near-front poll interval at the top.

// Rate estimator constants.
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
	// sees it: half the near-front poll interval (1.5 s, PollAfter).
	pollLate = 750 * time.Millisecond
	// pollLateMax is the longest such delay (1.5 s + 20 % jitter).
	pollLateMax = 1800 * time.Millisecond
	// maxETA caps every estimate.
	maxETA = 24 * time.Hour
)

// window accumulates one measuring window of the variances.
type window struct {
	start          time.Time
	admitted, left float64
	// last is the length of the last closed window, in seconds.
	last float64
}

// Forecast is the predicted wait of a visitor at a place in line: ETA, the
// best estimate, and the range [Low, High] that should hold the actual
// wait nine times in ten.
type Forecast struct {
	ETA, Low, High time.Duration
}

// measure updates v's rates and their variances from the refresh that
// read prev (dt seconds before v). Called with someone waiting in prev.
func (v *View) measure(prev View, dt float64) {
	admitted := float64(v.AdmittedTotal - prev.AdmittedTotal)
	if admitted < 0 { // the store lost the room's counters
		v.win = window{start: v.At}
		return
	}
	left := 0.0
	if v.Draw.Done == prev.Draw.Done {
		// An opening draw assigns sequence numbers to visitors already
		// counted as waiting, which would read as arrivals that left: the
		// refresh that sees it measures no leaving.
		left = max(0, float64(v.LastSeq-prev.LastSeq)-admitted-float64(v.Waiting-prev.Waiting))
	}
	a := 1 - math.Exp(-dt/rateTimeConstant)
	v.Rate += a * (admitted/dt - v.Rate)
	v.Leave += a * (left/dt - v.Leave)

	if v.win.start.IsZero() {
		v.win.start = prev.At
	}
	v.win.admitted += admitted
	v.win.left += left
	w := v.At.Sub(v.win.start)
	if w < max(minWindow, 2*v.Settings.Interval) {
		return
	}
	ws := w.Seconds()
	b := 1 - math.Exp(-ws/varTimeConstant)
	dr, dl := v.win.admitted/ws-v.Rate, v.win.left/ws-v.Leave
	v.RateVar += b * (dr*dr - v.RateVar)
	v.LeaveVar += b * (dl*dl - v.LeaveVar)
	v.win = window{start: v.At, last: ws}
}

// rateBound: a measured rate at least this share of the rate in force says
// that the rate, not max_active or an empty line, set the pace.
const rateBound = 0.9

// inForce is the rate at which v's room admits: the rate in force
// (CurrentRate), or 0 while it admits nobody (paused, closed, sold out, or
// before its opening draw is done).
func (v View) inForce() float64 {
	if v.EffectiveState() != Open || v.Draw.Seed != nil && !v.Draw.Done {
		return 0
	}
	return v.Settings.CurrentRate(v.Control)
}

// follow moves v's measured rate at once when the operator changed the
// rate in force since prev (a PUT of the rate or the admission mode, a
// pause, an opening or the opening draw), rather than over the EWMA's time
// constant: a room configured while nobody waited would otherwise forecast
// the first wave of a sale at the old rate, and one that opens (or draws
// its pre-queue) at a measured rate near 0.
// A room that kept pace with the old rate (rateBound) takes the new one;
// one held below it by max_active keeps its measured rate, or the new one
// if that is lower. The adaptive controller's own steps are measured, not
// followed: it probes up and backs off every few periods, and the EWMA
// averages that dithering into the rate the room keeps.
func (v *View) follow(prev View) {
	was, now := prev.inForce(), v.inForce()
	stepped := prev.Settings.Admission == Adaptive && v.Settings.Admission == Adaptive &&
		prev.Settings.AdmitRate == v.Settings.AdmitRate && was > 0 && now > 0
	switch {
	case was == now || stepped:
	case v.Rate >= rateBound*was:
		v.Rate = now
	default:
		v.Rate = min(v.Rate, now)
	}
}

// idle restarts v's measuring window: nobody waited, so nothing was
// measured.
func (v *View) idle() { v.win = window{start: v.At, last: v.win.last} }

// newView is a view of stats read at: its measured rate starts at the rate
// in force.
func newView(st Stats, at time.Time) View {
	v := View{Stats: st, At: at}
	v.Rate = v.inForce()
	return v
}

// carry copies the estimator's state from an older view of the room, and
// follows a change of the rate in force since it.
func (v *View) carry(old View) {
	v.Rate, v.RateVar, v.Leave, v.LeaveVar, v.win = old.Rate, old.RateVar, old.Leave, old.LeaveVar, old.win
	v.follow(old)
}

// Forecast predicts the wait of a visitor at position (1 at the head),
// from the measured admission rate (floored at 5 % of the configured one,
// so that a stalled or paused room shows a long wait rather than none),
// the measured leaving ahead, and their variances; capped at a day.
func (v View) Forecast(position int64) Forecast {
	floor := 0.05 * v.Settings.Current(v.Control).AdmitRate
	mu := max(v.Rate, floor)
	n := float64(max(position, 1))
	h := 0.0
	if v.Waiting > 0 {
		h = max(0, v.Leave) / float64(v.Waiting)
	}
	t := drain(n, mu, h)
	// The spread of the mean rates over the horizon: windows of w seconds
	// averaged over t seconds.
	w := max(v.win.last, minWindow.Seconds())
	share := min(1, w/max(t, w))
	sdMu := math.Sqrt(v.RateVar * share)
	sdH := 0.0
	if v.Waiting > 0 {
		sdH = math.Sqrt(v.LeaveVar*share) / float64(v.Waiting)
	}
	lo := drain(n, mu+etaZ*sdMu, h+etaZ*sdH)
	hi := drain(n, max(floor, mu-etaZ*sdMu), max(0, h-etaZ*sdH))
	step := v.Settings.Interval.Seconds() / 2
	return Forecast{
		ETA:  seconds(t + pollLate.Seconds()),
		Low:  seconds(max(0, lo-step)),
		High: seconds(hi + step + pollLateMax.Seconds()),
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
	return time.Duration(min(s, maxETA.Seconds()) * float64(time.Second))
}

// Admitted records how the wait forecast when a visitor's ticket was issued
// (at issued) compares with the wait it had: a poll on this instance found
// the visitor admitted at the Queue's now. The error ratio (actual −
// predicted) ÷ actual goes into usher_eta_error_ratio, and whether the
// actual wait fell inside the range into usher_eta_range_total. Each
// visitor's place (room, visitor, seq) is observed once per instance: later
// polls of the same admitted visitor are not counted (a place is
// remembered for seenFor, at most seenMax of them).
func (q *Queue) Admitted(room, visitor string, seq int64, issued time.Time, f Forecast) {
	if q.metrics == nil || f == (Forecast{}) {
		return
	}
	now := q.now()
	actual := now.Sub(issued)
	if actual <= 0 || !q.seen.first(room+"\x00"+visitor+"\x00"+strconv.FormatInt(seq, 10), now) {
		return
	}
	q.metrics.etaObserved(room, actual, f)
}

// seenFor is how long a place observed admitted is remembered, and seenMax
// how many: beyond that, admissions are not observed until some are
// forgotten.
const (
	seenFor = 2 * time.Minute
	seenMax = 1 << 17
)

// seenSet remembers the places whose admission was observed.
type seenSet struct {
	mu     sync.Mutex
	at     map[string]time.Time
	pruned time.Time
}

// first reports whether key is new, and remembers it.
func (s *seenSet) first(key string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at == nil {
		s.at = map[string]time.Time{}
	}
	if _, ok := s.at[key]; ok {
		return false
	}
	if now.Sub(s.pruned) >= seenFor/4 || len(s.at) >= seenMax {
		for k, t := range s.at {
			if now.Sub(t) >= seenFor {
				delete(s.at, k)
			}
		}
		s.pruned = now
	}
	if len(s.at) >= seenMax {
		return false
	}
	s.at[key] = now
	return true
}
