// Package control is a room's adaptive admission controller: Step is a pure
// function from (Params, State, Window, now) to the next State. It does no
// I/O and reads no clock; the caller pools the origin's Signals, decides
// when a step is Due, and stores the State it returns (internal/queue and
// its stores do, one step per room per period however many instances run).
//
// The law, its constants and why they have these values:
// docs/architecture.md#adaptive-admission.
package control

import (
	"math"
	"time"
)

// The controller's constants (docs/architecture.md#adaptive-admission
// says why these values).
const (
	// MinSamples is the fewest latency samples a step decides on; with
	// fewer the pool keeps filling, for at most staleSteps periods.
	MinSamples = 20
	staleSteps = 5
	// learnedTargetFactor: without TargetP95, the target is this many
	// times the learned unloaded p95.
	learnedTargetFactor = 1.5
	// aim: the controller holds each window's p95 at or below aim × the
	// target, so that a phase's p95 (its windows pooled) stays within it.
	aim = 0.9
	// holdBand is the bottom of the dead band: while the measured p95 is
	// between holdBand and 1 × the aim (aim × target), the rate holds.
	holdBand = 0.85
	// goodBand: a rate whose whole window kept the p95 at or below this
	// share of the aim is a good rate, one to come back to.
	goodBand = 0.9
	// maxIncrease is the largest factor a probe raises the rate by.
	maxIncrease = 1.2
	// recoverShare: an idle origin below this share of the highest rate
	// it held climbs back to it by recoverIncrease a verified period.
	recoverShare    = 0.9
	recoverIncrease = 1.5
	// maxDecrease is the smallest factor a cut that is not a drain lowers
	// the rate to (a drain goes as low as MinAdmitRate).
	maxDecrease = 0.5
	// decreaseAim: a decrease aims decreaseAim × the aim, inside the band.
	decreaseAim = 0.9
	// maxErrorShare: a window with more errors than this share of its
	// samples counts as overloaded (twice the target).
	maxErrorShare = 0.05
	// probeStep is the first step up (a share of the rate; beyond the
	// good rate it doubles with each probe that held, at most maxStreak
	// times, up to maxIncrease); maxBackoff bounds the wait between
	// probes (2^Backoff calm steps).
	probeStep  = 0.05
	maxBackoff = 3
	maxStreak  = 3
	// severeOverload: a window above this many times the aim means the
	// origin changed, not that a probe went too far.
	severeOverload = 1.5
	// settling: an overloaded window whose p95 is below this many times
	// the last window's does not cut again, unless it is saturated.
	settling = 1.05
	// drainShare: a cut after the origin changed keeps at least this
	// share of the visitors per second it served, so that its backlog
	// drains without starving it.
	drainShare = 0.7
	// perAdmitFrom is the fewest admissions in a window that update
	// PerAdmit, perAdmitGain the weight of the window's ratio.
	perAdmitFrom = 10
	perAdmitGain = 0.3
	// demandShare: the rate goes up only if the room admitted at least
	// this share of it during the period while visitors waited (the rate,
	// not a cap on active visitors or an empty queue, was what held
	// admissions back).
	demandShare = 0.8
	// saturatedShare: an origin that served fewer visitors a second than
	// this share of those admitted, with its median latency above the
	// unloaded p95, is saturated: it falls behind.
	saturatedShare = 0.9
	// drainedShare: a drain ends when its backlog is at most this share
	// of what the rate to resume at admits in a period (or when the
	// window's p95 is back within the aim).
	drainedShare = 0.1
)

// Params are what the controller reads of a room's settings.
type Params struct {
	// Static: the room admits at AdmitRate, whatever the State says, and
	// no step is due.
	Static bool
	// AdmitRate is the configured rate (visitors a second): the rate
	// before the first step.
	AdmitRate float64
	// MinAdmitRate and MaxAdmitRate bound the rate the controller sets.
	MinAdmitRate, MaxAdmitRate float64
	// TargetP95 is the origin's p95 to hold; 0 learns it (Target).
	TargetP95 time.Duration
	// Period is the time between steps.
	Period time.Duration
}

// Window is what a step decides on: the pooled signals since the last step
// and the room's counters now.
type Window struct {
	Signals  Signals
	Waiting  int64
	Admitted int64 // the room's admissions in total
}

// Rate is the admission rate in force: AdmitRate for a static room; for an
// adaptive one the controller's rate, or AdmitRate before its first step,
// within MinAdmitRate and MaxAdmitRate. Stores refill their token bucket at
// it (queue.Limits).
func Rate(p Params, c State) float64 {
	if p.Static {
		return p.AdmitRate
	}
	r := c.Rate
	if r <= 0 {
		r = p.AdmitRate
	}
	return p.clamp(r)
}

// Target is the p95 the controller holds: TargetP95, else
// learnedTargetFactor × the learned baseline (0 while unknown).
func Target(p Params, c State) time.Duration {
	if p.TargetP95 > 0 {
		return p.TargetP95
	}
	return time.Duration(learnedTargetFactor * float64(c.Baseline))
}

// Due reports whether a step is due at now.
func Due(p Params, c State, now time.Time) bool {
	return !p.Static && now.Sub(c.At) >= p.Period
}

// Step runs one controller step at now (call it when Due). It returns the
// next state and whether it used the window: when it did not (too few
// samples yet), the caller stores nothing and keeps pooling.
//
// The law (docs/architecture.md#adaptive-admission), with q = the
// window's p95 ÷ (aim × the target) (more than maxErrorShare errors count
// as q ≥ 2), deciding only on windows that a whole period of one rate
// produced:
//   - Saturated: q > 1, the median above the unloaded p95 (Baseline), and
//     the origin serving fewer than saturatedShare of the visitors
//     admitted, at a rate at or below the good rate (or with
//     q > severeOverload). It serves n ÷ PerAdmit visitors a second (BBR's
//     delivery rate: its capacity now) and holds n/s × (p95 − Baseline)
//     requests more than unloaded (Little's law on the excess latency),
//     one per visitor: the backlog. Admit what it serves less what drains
//     the backlog within a period; follow the backlog (admitted less
//     served) and drain on while more than drainedShare of a period's
//     admissions is left and the p95 is above the aim; then resume at
//     decreaseAim × what it served, the new good rate. A saturated window
//     is never skipped.
//   - q > severeOverload, or q > 1 with no good rate known (and not
//     saturated): cut by max(maxDecrease, decreaseAim ÷ q), not below
//     drainShare of the visitors per second it served; forget the good
//     rate; skip the next step (its window still shows the old load).
//   - 1 < q ≤ severeOverload: a probe went too far, or the good rate was
//     optimistic: back to decreaseAim × the good rate; double the wait
//     before the next probe; skip the next step.
//     Neither when the p95 stopped growing (below settling × the last
//     window's): the backlog of an earlier overload no longer fills.
//   - holdBand ≤ q ≤ 1: hold.
//   - q < holdBand, visitors waiting and the rate used: if the p95 is at
//     most Baseline (idle) and the rate below recoverShare × the highest
//     good rate ever (Peak), the origin got capacity back: up by
//     recoverIncrease a verified period, to recoverShare × Peak. Else,
//     with no overload seen since the origin last changed, up by
//     probeStep, one verified step at a time; else back up to the good
//     rate, or, after 2^Backoff calm steps at it (one after a probe that
//     held), probe beyond it by probeStep, doubling with each probe that
//     held, and at most halfway to the rate that last overloaded it.
//
// A rate that the room used (demandShare of it admitted while visitors
// waited) and whose whole window kept q ≤ goodBand becomes the good rate.
func Step(p Params, c State, w Window, now time.Time) (State, bool) {
	next := c
	next.At, next.Admitted, next.Version = now.Truncate(time.Millisecond), w.Admitted, c.Version+1
	rate := Rate(p, c)
	next.Rate = rate
	if c.At.IsZero() { // the first step: start the clock, discard the window
		return next, true
	}
	elapsed := now.Sub(c.At)
	if w.Signals.Count < MinSamples {
		if elapsed < staleSteps*p.Period {
			return c, false
		}
		next.Hold = max(0, c.Hold-1)
		if c.Resume > 0 { // a drain with nothing to follow it by ends
			next.endDrain()
		}
		return next, true // nothing to go by: hold
	}
	p95 := w.Signals.Quantile(0.95)
	next.P95 = p95
	n := float64(w.Signals.Count)
	if b := time.Duration(float64(p95) * (1 + 1/math.Sqrt(n))); c.Baseline == 0 || b < c.Baseline {
		next.Baseline = b
	}
	next.Steady = c.Steady + 1
	secs := elapsed.Seconds()
	served := 0.0 // visitors a second the origin served
	if c.PerAdmit > 0 {
		served = n / secs / c.PerAdmit
	}
	// drain is the rate that leaves a backlog of visitors drained within
	// a period.
	drain := func(backlog float64) float64 { return served - backlog/p.Period.Seconds() }
	used := demand(c, w, rate, elapsed)
	target := Target(p, next)
	aimed := aim * float64(target) // the p95 aimed at
	within := target > 0 && float64(p95) <= aimed
	// Saturated: the median request queues (above the unloaded p95) and
	// the origin serves fewer visitors than were admitted: it falls behind
	// (at a rate that is not a probe beyond the good rate, unless the p95
	// is far above the aim: a probe's overload is left to its back-off).
	saturated := served > 0 && c.Baseline > 0 && w.Signals.Quantile(0.5) > c.Baseline &&
		served < saturatedShare*float64(w.Admitted-c.Admitted)/secs && !within &&
		(rate <= c.Good || float64(p95) > severeOverload*aimed)
	switch {
	case c.Hold > 0 && c.Resume > 0: // draining: what is left of the backlog?
		next.Hold = c.Hold - 1
		next.Backlog = max(0, c.Backlog+float64(w.Admitted-c.Admitted)-served*secs)
		if next.Backlog > drainedShare*c.Resume*p.Period.Seconds() && !within {
			next.Hold, next.Rate = 1, p.clamp(drain(next.Backlog))
		} else {
			next.endDrain()
		}
		return next, true
	case c.Hold > 0 && !saturated: // the window after a decrease still shows the load before it
		next.Hold = c.Hold - 1
		return next, true
	}
	failing := float64(w.Signals.Errors) > maxErrorShare*n
	var q float64
	switch {
	case target > 0:
		q = float64(p95) / aimed
	case !failing: // a guard: this window's p95 has just set a baseline if none was
		return next, true
	}
	if failing {
		q = max(q, 2)
	}
	if q <= goodBand && c.Steady > 0 && rate > c.Good && used { // used and held for a whole window: a good rate
		next.Streak, next.Backoff = min(c.Streak+1, maxStreak), 0 // an increase held
		if c.Limit > 0 && rate >= c.Limit {
			next.Limit = 0 // beyond the old limit: the origin grew
		}
		next.Good, next.Peak = rate, max(c.Peak, rate)
	}
	// A p95 above the target that stopped growing (within settling of the
	// last window's) is a backlog no longer filling: the last decrease
	// works, and the next window will show it draining.
	improving := c.P95 > 0 && float64(p95) < settling*float64(c.P95) && !failing
	switch {
	case saturated:
		// Saturated: most requests queue. The origin serves served
		// visitors a second (its capacity), and excess visitors are queued
		// in it beyond what it holds unloaded (Little's law on the excess
		// latency): admit what it serves less what drains the excess
		// within a period.
		next.Backlog = n / secs * max(0, (p95-c.Baseline).Seconds())
		next.Rate, next.Resume, next.Hold = drain(next.Backlog), p.clamp(decreaseAim*served), 1
		next.Good, next.Limit, next.Backoff, next.Calm, next.Streak = next.Resume, rate, 0, 0, 0
		if c.Hold > 0 { // the window still shows the rate before the last cut
			next.Limit = max(rate, c.Limit)
		}
		if c.Good > 0 && rate > c.Good { // a probe beyond the good rate went too far
			next.Backoff = min(c.Backoff+1, maxBackoff)
		}
	case q > 1 && !improving:
		next.Hold, next.Calm, next.Streak, next.Limit = 1, 0, 0, rate
		if q <= severeOverload && c.Good > 0 {
			// Just above the target: a probe beyond the good rate, or a
			// good rate that was too optimistic. Back below it while the
			// backlog drains, and wait twice as long before the next probe.
			next.Rate, next.Backoff = decreaseAim*min(rate, c.Good), min(c.Backoff+1, maxBackoff)
			if rate <= c.Good {
				next.Good = next.Rate
			}
			break
		}
		// Far above the target: the origin changed. Cut deep enough to
		// drain the backlog, but not below drainShare of what the origin
		// served (it keeps serving that), and learn the good rate again.
		next.Rate, next.Good, next.Backoff = rate*max(maxDecrease, decreaseAim/q), 0, 0
		if c.PerAdmit > 0 {
			next.Rate = max(next.Rate, min(rate, drainShare*served))
		}
	case q < holdBand && p95 <= c.Baseline && c.Steady > 0 && rate < recoverShare*next.Peak && used:
		// Idle (the p95 at the unloaded one) well below the highest rate
		// the origin held: it lost capacity and may have it back. Up every
		// verified period by recoverIncrease, to recoverShare of that rate.
		next.Rate, next.Calm = min(recoverShare*next.Peak, rate*recoverIncrease), 0
	case q < holdBand && c.Steady > 0 && used:
		next.Calm = c.Calm + 1
		switch {
		case next.Limit == 0: // no overload known: up, one verified step at a time
			next.Rate, next.Calm = rate*(1+probeStep), 0
		case rate < next.Good:
			next.Rate = next.Good
		case next.Calm > 1<<next.Backoff || next.Streak > 0 && next.Calm >= 1:
			// Probe beyond the good rate, by a step that doubles with each
			// probe that held.
			next.Rate, next.Calm = rate*min(maxIncrease, 1+probeStep*float64(int64(1)<<next.Streak)), 0
			if next.Limit > rate { // at most halfway to where the origin was overloaded
				next.Rate = min(next.Rate, max(rate*(1+probeStep/2), (rate+next.Limit)/2))
			}
		}
	}
	if admitted := float64(w.Admitted - c.Admitted); q <= 1 && c.Steady > 0 && admitted >= perAdmitFrom && used {
		if per := n / admitted; c.PerAdmit == 0 {
			next.PerAdmit = per
		} else {
			next.PerAdmit = c.PerAdmit + perAdmitGain*(per-c.PerAdmit)
		}
	}
	next.Rate = p.clamp(next.Rate)
	if next.Rate != rate {
		next.Steady = 0
	}
	return next, true
}

// clamp bounds an adaptive rate to [MinAdmitRate, MaxAdmitRate].
func (p Params) clamp(rate float64) float64 { return min(max(rate, p.MinAdmitRate), p.MaxAdmitRate) }

// demand reports whether the rate held admissions back during the window:
// visitors wait and the room admitted at least demandShare of the rate.
func demand(c State, w Window, rate float64, elapsed time.Duration) bool {
	return w.Waiting > 0 && float64(w.Admitted-c.Admitted) >= demandShare*rate*elapsed.Seconds()
}
