package queue

import (
	"strconv"
	"sync"
	"time"

	"usher/internal/queue/forecast"
)

// Forecast is the predicted wait of a visitor at a place in line (package
// forecast).
type Forecast = forecast.Forecast

// counts is what v gives the estimator.
func (v *View) counts() forecast.Counts {
	return forecast.Counts{At: v.At, Admitted: v.AdmittedTotal, Issued: v.LastSeq, Waiting: v.Waiting, Drawn: v.Draw.Done}
}

// rateBound: a measured rate at least this share of the rate in force says
// that the rate, not max_active or an empty line, set the pace.
const rateBound = 0.9

// inForce is the rate at which v's room admits: the rate in force
// (CurrentRate), or 0 while it admits nobody (paused, closed, sold out, or
// before its opening draw is done).
func (v *View) inForce() float64 {
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
	v.Rates = old.Rates
	v.follow(old)
}

// Forecast predicts the wait of a visitor at position (1 at the head)
// from v's measured rates (forecast.Rates.Forecast), the admission rate
// floored at 5 % of the one in force, so that a stalled or paused room
// shows a long wait rather than none.
func (v *View) Forecast(position int64) Forecast {
	floor := 0.05 * v.Settings.Current(v.Control).AdmitRate
	return v.Rates.Forecast(position, v.Waiting, floor, v.Settings.Interval)
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
