package queue

import (
	"math"
	"strconv"
	"time"
)

// Admission says who sets a room's admission rate.
type Admission string

const (
	// Static rooms admit at the configured AdmitRate.
	Static Admission = "static"
	// Adaptive rooms admit at the rate their controller sets (Control.Rate),
	// following the origin's latency.
	Adaptive Admission = "adaptive"
)

// The adaptive controller's constants (docs/architecture.md#adaptive-admission
// says why these values).
const (
	// LearnedTargetFactor: without TargetP95, the target is this many times
	// the learned unloaded p95.
	LearnedTargetFactor = 1.5
	// Aim: the controller holds each window's p95 at or below Aim × the
	// target, so that a phase's p95 (its windows pooled) stays within it.
	Aim = 0.9
	// HoldBand is the bottom of the dead band: while the measured p95 is
	// between HoldBand and 1 × the aim (Aim × target), the rate holds.
	HoldBand = 0.85
	// GoodBand: a rate whose whole window kept the p95 at or below this
	// share of the aim is a good rate, one to come back to.
	GoodBand = 0.9
	// MaxIncrease is the largest factor a probe raises the rate by.
	MaxIncrease = 1.2
	// RecoverShare: an idle origin below this share of the highest rate
	// it held climbs back to it by RecoverIncrease a verified period.
	RecoverShare    = 0.9
	RecoverIncrease = 1.5
	// MaxDecrease is the smallest factor a cut that is not a drain lowers
	// the rate to (a drain goes as low as min_admit_rate).
	MaxDecrease = 0.5
	// DecreaseAim: a decrease aims DecreaseAim × the aim, inside the band.
	DecreaseAim = 0.9
	// MinSamples is the fewest latency samples a step decides on; with
	// fewer the pool keeps filling, for at most StaleSteps periods.
	MinSamples = 20
	StaleSteps = 5
	// MaxErrorShare: a window with more errors than this share of its
	// samples counts as overloaded (twice the target).
	MaxErrorShare = 0.05
	// ProbeStep is the first step up (a share of the rate; beyond the
	// good rate it doubles with each probe that held, up to MaxIncrease);
	// MaxBackoff bounds the wait between probes (2^Backoff calm steps).
	ProbeStep = 0.05
	// SevereOverload: a window above this many times the aim means the
	// origin changed, not that a probe went too far.
	SevereOverload = 1.5
	MaxBackoff     = 3
	MaxStreak      = 3
	// Settling: an overloaded window whose p95 is below this many times
	// the last window's does not cut again, unless it is saturated.
	Settling = 1.05
	// DrainShare: a cut after the origin changed keeps at least this
	// share of the visitors per second it served, so that its backlog
	// drains without starving it.
	DrainShare = 0.7
	// PerAdmitFrom is the fewest admissions in a window that update
	// PerAdmit, PerAdmitGain the weight of the window's ratio.
	PerAdmitFrom = 10
	PerAdmitGain = 0.3
	// DemandShare: the rate goes up only if the room admitted at least this
	// share of it during the period while visitors waited (the rate, not
	// MaxActive or an empty queue, was what held admissions back).
	DemandShare = 0.8
	// SaturatedShare: an origin that served fewer visitors a second than
	// this share of those admitted, with its median latency above the
	// unloaded p95, is saturated: it falls behind.
	SaturatedShare = 0.9
	// DrainedShare: a drain ends when its backlog is at most this share
	// of what the rate to resume at admits in a period (or when the
	// window's p95 is back within the aim).
	DrainedShare = 0.1
)

// Control is a room's adaptive controller state, one per room in the store
// however many instances run: every field is listed in ControlFields.
type Control struct {
	// Rate is the admission rate the controller set (admit_rate_current);
	// 0 before its first step.
	Rate float64
	// Baseline is the learned unloaded p95: the least, over the windows
	// so far, of the window's p95 × (1 + 1/√n) for its n samples (the
	// correction offsets the p95's sampling noise, which would drag a
	// plain minimum below the truth); 0 before the first window.
	Baseline time.Duration
	// PerAdmit is the origin samples per admitted visitor, an average
	// over windows within the target: with the samples per second of an
	// overloaded window, the rate the origin keeps up with.
	PerAdmit float64
	// Good is the highest rate that held (two windows within the target)
	// since the origin last changed (0: none known). Steady counts the
	// steps since the rate last changed, Calm the steps at or above Good
	// below the band since the last probe, Backoff the probes that
	// overloaded in a row (the next waits 2^Backoff calm steps), Streak
	// those that held (the next probes twice as far).
	Good                          float64
	Steady, Calm, Backoff, Streak int64
	// Peak is the highest good rate the origin held (0: none).
	Peak float64
	// Limit is the rate at which the origin was last overloaded (0: none
	// since it last changed): increases below it probe, above it grow.
	Limit float64
	// At is the time of the last step (whole milliseconds); zero before
	// the first.
	At time.Time
	// Admitted is the room's AdmittedTotal at the last step.
	Admitted int64
	// Hold counts the steps still to skip after a decrease, so that the
	// next decision sees the decrease's effect.
	Hold int64
	// Resume is the rate to take when a drain ends (0: not draining), and
	// Backlog the visitors the origin holds beyond what it holds unloaded,
	// estimated when the drain began and followed since (admitted less
	// served).
	Resume, Backlog float64
	// Version counts steps; a step is stored only over the version it read
	// (Store.SetControl), so one step per period runs however many
	// instances try.
	Version int64
	// P95 is the p95 of the last step's window (for stats and metrics).
	P95 time.Duration
}

// CurrentRate is the admission rate in force: AdmitRate for a static room;
// for an adaptive one the controller's rate, or AdmitRate before its first
// step, within MinAdmitRate and MaxAdmitRate. Stores refill their token
// bucket at it (redisqueue's bucket.lua computes the same).
func (s Settings) CurrentRate(c Control) float64 {
	if s.Admission != Adaptive {
		return s.AdmitRate
	}
	r := c.Rate
	if r <= 0 {
		r = s.AdmitRate
	}
	return s.clamp(r)
}

// Current returns s with AdmitRate set to CurrentRate(c): the settings the
// admission step follows (Batch, BucketCapacity).
func (s Settings) Current(c Control) Settings {
	s.AdmitRate = s.CurrentRate(c)
	return s
}

// Target is the p95 the controller holds: TargetP95, else
// LearnedTargetFactor × the learned baseline (0 while unknown).
func (s Settings) Target(c Control) time.Duration {
	if s.TargetP95 > 0 {
		return s.TargetP95
	}
	return time.Duration(LearnedTargetFactor * float64(c.Baseline))
}

// ControlDue reports whether a controller step is due at now.
func (s Settings) ControlDue(c Control, now time.Time) bool {
	return s.Admission == Adaptive && now.Sub(c.At) >= s.ControlPeriod
}

// Window is what a controller step decides on: the pooled signals since the
// last step and the room's counters now.
type Window struct {
	Signals  Signals
	Waiting  int64
	Admitted int64 // AdmittedTotal
}

// Step runs one controller step at now (call it when ControlDue). It
// returns the next state and whether it used the window: when it did not
// (too few samples yet), the caller stores nothing and keeps pooling.
//
// The law (docs/architecture.md#adaptive-admission), with q = the
// window's p95 ÷ (Aim × the target) (more than MaxErrorShare errors count
// as q ≥ 2), deciding only on windows that a whole period of one rate
// produced:
//   - Saturated: q > 1, the median above the unloaded p95 (Baseline), and
//     the origin serving fewer than SaturatedShare of the visitors
//     admitted, at a rate at or below the good rate (or with
//     q > SevereOverload). It serves n ÷ PerAdmit visitors a second (BBR's
//     delivery rate: its capacity now) and holds n/s × (p95 − Baseline)
//     requests more than unloaded (Little's law on the excess latency),
//     one per visitor: the backlog. Admit what it serves less what drains
//     the backlog within a period; follow the backlog (admitted less
//     served) and drain on while more than DrainedShare of a period's
//     admissions is left and the p95 is above the aim; then resume at
//     DecreaseAim × what it served, the new good rate. A saturated window
//     is never skipped.
//   - q > SevereOverload, or q > 1 with no good rate known (and not
//     saturated): cut by max(MaxDecrease, DecreaseAim ÷ q), not below
//     DrainShare of the visitors per second it served; forget the good
//     rate; skip the next step (its window still shows the old load).
//   - 1 < q ≤ SevereOverload: a probe went too far, or the good rate was
//     optimistic: back to DecreaseAim × the good rate; double the wait
//     before the next probe; skip the next step.
//     Neither when the p95 stopped growing (below Settling × the last
//     window's): the backlog of an earlier overload no longer fills.
//   - HoldBand ≤ q ≤ 1: hold.
//   - q < HoldBand, visitors waiting and the rate used: if the p95 is at
//     most Baseline (idle) and the rate below RecoverShare × the highest
//     good rate ever (Peak), the origin got capacity back: up by
//     RecoverIncrease a verified period, to RecoverShare × Peak. Else,
//     with no overload seen since the origin last changed, up by
//     ProbeStep, one verified step at a time; else back up to the good
//     rate, or, after 2^Backoff calm steps at it (one after a probe that
//     held), probe beyond it by ProbeStep, doubling with each probe that
//     held, and at most halfway to the rate that last overloaded it.
//
// A rate that the room used (DemandShare of it admitted while visitors
// waited) and whose whole window kept q ≤ GoodBand becomes the good rate.
func (s Settings) Step(c Control, w Window, now time.Time) (Control, bool) {
	next := c
	next.At, next.Admitted, next.Version = now.Truncate(time.Millisecond), w.Admitted, c.Version+1
	rate := s.CurrentRate(c)
	next.Rate = rate
	if c.At.IsZero() { // the first step: start the clock, discard the window
		return next, true
	}
	elapsed := now.Sub(c.At)
	if w.Signals.Count < MinSamples {
		if elapsed < StaleSteps*s.ControlPeriod {
			return c, false
		}
		next.Hold = max(0, c.Hold-1)
		if c.Resume > 0 { // a drain with nothing to follow it by ends
			next.endDrain()
		}
		return next, true // nothing to go by: hold
	}
	p := w.Signals.Quantile(0.95)
	next.P95 = p
	n := float64(w.Signals.Count)
	if b := time.Duration(float64(p) * (1 + 1/math.Sqrt(n))); c.Baseline == 0 || b < c.Baseline {
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
	drain := func(backlog float64) float64 { return served - backlog/s.ControlPeriod.Seconds() }
	used := s.demand(c, w, rate, elapsed)
	target := s.Target(next)
	aim := Aim * float64(target)
	within := target > 0 && float64(p) <= aim // the p95 within the aim
	// Saturated: the median request queues (above the unloaded p95) and
	// the origin serves fewer visitors than were admitted: it falls behind
	// (at a rate that is not a probe beyond the good rate, unless the p95
	// is far above the aim: a probe's overload is left to its back-off).
	saturated := served > 0 && c.Baseline > 0 && w.Signals.Quantile(0.5) > c.Baseline &&
		served < SaturatedShare*float64(w.Admitted-c.Admitted)/secs && !within &&
		(rate <= c.Good || float64(p) > SevereOverload*aim)
	switch {
	case c.Hold > 0 && c.Resume > 0: // draining: what is left of the backlog?
		next.Hold = c.Hold - 1
		next.Backlog = max(0, c.Backlog+float64(w.Admitted-c.Admitted)-served*secs)
		if next.Backlog > DrainedShare*c.Resume*s.ControlPeriod.Seconds() && !within {
			next.Hold, next.Rate = 1, s.clamp(drain(next.Backlog))
		} else {
			next.endDrain()
		}
		return next, true
	case c.Hold > 0 && !saturated: // the window after a decrease still shows the load before it
		next.Hold = c.Hold - 1
		return next, true
	}
	failing := float64(w.Signals.Errors) > MaxErrorShare*n
	var q float64
	switch {
	case target > 0:
		q = float64(p) / aim
	case !failing: // a guard: this window's p95 has just set a baseline if none was
		return next, true
	}
	if failing {
		q = max(q, 2)
	}
	if q <= GoodBand && c.Steady > 0 && rate > c.Good && used { // used and held for a whole window: a good rate
		next.Streak, next.Backoff = min(c.Streak+1, MaxStreak), 0 // an increase held
		if c.Limit > 0 && rate >= c.Limit {
			next.Limit = 0 // beyond the old limit: the origin grew
		}
		next.Good, next.Peak = rate, max(c.Peak, rate)
	}
	// A p95 above the target that stopped growing (within Settling of the
	// last window's) is a backlog no longer filling: the last decrease
	// works, and the next window will show it draining.
	improving := c.P95 > 0 && float64(p) < Settling*float64(c.P95) && !failing
	switch {
	case saturated:
		// Saturated: most requests queue. The origin serves served
		// visitors a second (its capacity), and excess visitors are queued
		// in it beyond what it holds unloaded (Little's law on the excess
		// latency): admit what it serves less what drains the excess
		// within a period.
		next.Backlog = n / secs * max(0, (p-c.Baseline).Seconds())
		next.Rate, next.Resume, next.Hold = drain(next.Backlog), s.clamp(DecreaseAim*served), 1
		next.Good, next.Limit, next.Backoff, next.Calm, next.Streak = next.Resume, rate, 0, 0, 0
		if c.Hold > 0 { // the window still shows the rate before the last cut
			next.Limit = max(rate, c.Limit)
		}
		if c.Good > 0 && rate > c.Good { // a probe beyond the good rate went too far
			next.Backoff = min(c.Backoff+1, MaxBackoff)
		}
	case q > 1 && !improving:
		next.Hold, next.Calm, next.Streak, next.Limit = 1, 0, 0, rate
		if q <= SevereOverload && c.Good > 0 {
			// Just above the target: a probe beyond the good rate, or a
			// good rate that was too optimistic. Back below it while the
			// backlog drains, and wait twice as long before the next probe.
			next.Rate, next.Backoff = DecreaseAim*min(rate, c.Good), min(c.Backoff+1, MaxBackoff)
			if rate <= c.Good {
				next.Good = next.Rate
			}
			break
		}
		// Far above the target: the origin changed. Cut deep enough to
		// drain the backlog, but not below DrainShare of what the origin
		// served (it keeps serving that), and learn the good rate again.
		next.Rate, next.Good, next.Backoff = rate*max(MaxDecrease, DecreaseAim/q), 0, 0
		if c.PerAdmit > 0 {
			next.Rate = max(next.Rate, min(rate, DrainShare*served))
		}
	case q < HoldBand && p <= c.Baseline && c.Steady > 0 && rate < RecoverShare*next.Peak && used:
		// Idle (the p95 at the unloaded one) well below the highest rate
		// the origin held: it lost capacity and may have it back. Up every
		// verified period by RecoverIncrease, to RecoverShare of that rate.
		next.Rate, next.Calm = min(RecoverShare*next.Peak, rate*RecoverIncrease), 0
	case q < HoldBand && c.Steady > 0 && used:
		next.Calm = c.Calm + 1
		switch {
		case next.Limit == 0: // no overload known: up, one verified step at a time
			next.Rate, next.Calm = rate*(1+ProbeStep), 0
		case rate < next.Good:
			next.Rate = next.Good
		case next.Calm > 1<<next.Backoff || next.Streak > 0 && next.Calm >= 1:
			// Probe beyond the good rate, by a step that doubles with each
			// probe that held.
			next.Rate, next.Calm = rate*min(MaxIncrease, 1+ProbeStep*float64(int64(1)<<next.Streak)), 0
			if next.Limit > rate { // at most halfway to where the origin was overloaded
				next.Rate = min(next.Rate, max(rate*(1+ProbeStep/2), (rate+next.Limit)/2))
			}
		}
	}
	if admitted := float64(w.Admitted - c.Admitted); q <= 1 && c.Steady > 0 && admitted >= PerAdmitFrom && used {
		if per := n / admitted; c.PerAdmit == 0 {
			next.PerAdmit = per
		} else {
			next.PerAdmit = c.PerAdmit + PerAdmitGain*(per-c.PerAdmit)
		}
	}
	next.Rate = s.clamp(next.Rate)
	if next.Rate != rate {
		next.Steady = 0
	}
	return next, true
}

// clamp bounds an adaptive rate to [MinAdmitRate, MaxAdmitRate].
func (s Settings) clamp(rate float64) float64 { return min(max(rate, s.MinAdmitRate), s.MaxAdmitRate) }

// endDrain ends a drain: back to the rate it resumes at, and a step of
// its own (the next window is verified before anything moves on from it).
func (c *Control) endDrain() {
	c.Rate, c.Resume, c.Backlog, c.Hold, c.Steady = c.Resume, 0, 0, 0, 0
}

// demand reports whether the rate held admissions back during the window:
// visitors wait and the room admitted at least DemandShare of the rate.
func (s Settings) demand(c Control, w Window, rate float64, elapsed time.Duration) bool {
	return w.Waiting > 0 && float64(w.Admitted-c.Admitted) >= DemandShare*rate*elapsed.Seconds()
}

// A ControlField is one field of Control as stores keep it: by name, as a
// string (see Field).
type ControlField struct {
	Name   string
	Encode func(Control) string
	Decode func(c *Control, v string) error
}

// ControlFields lists every field of Control. Stores keep them next to the
// settings (redisqueue: in the room's hash); admit_rate_current is what the
// admission step reads.
func ControlFields() []ControlField { return controlFields }

var controlFields = []ControlField{
	ctlFloat("admit_rate_current", func(c *Control) *float64 { return &c.Rate }),
	ctlInt("ctl_baseline_ns", func(c *Control) *int64 { return (*int64)(&c.Baseline) }),
	{"ctl_at_ms",
		func(c Control) string {
			if c.At.IsZero() {
				return "0"
			}
			return strconv.FormatInt(c.At.UnixMilli(), 10)
		},
		func(c *Control, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			c.At = time.Time{}
			if n != 0 {
				c.At = time.UnixMilli(n).UTC()
			}
			return err
		}},
	ctlInt("ctl_admitted", func(c *Control) *int64 { return &c.Admitted }),
	ctlInt("ctl_hold", func(c *Control) *int64 { return &c.Hold }),
	ctlFloat("ctl_backlog", func(c *Control) *float64 { return &c.Backlog }),
	ctlFloat("ctl_resume", func(c *Control) *float64 { return &c.Resume }),
	ctlFloat("ctl_good", func(c *Control) *float64 { return &c.Good }),
	ctlInt("ctl_steady", func(c *Control) *int64 { return &c.Steady }),
	ctlFloat("ctl_peak", func(c *Control) *float64 { return &c.Peak }),
	ctlFloat("ctl_limit", func(c *Control) *float64 { return &c.Limit }),
	ctlInt("ctl_backoff", func(c *Control) *int64 { return &c.Backoff }),
	ctlInt("ctl_calm", func(c *Control) *int64 { return &c.Calm }),
	ctlInt("ctl_streak", func(c *Control) *int64 { return &c.Streak }),
	ctlFloat("ctl_per_admit", func(c *Control) *float64 { return &c.PerAdmit }),
	ctlInt("ctl_version", func(c *Control) *int64 { return &c.Version }),
	ctlInt("ctl_p95_ns", func(c *Control) *int64 { return (*int64)(&c.P95) }),
}

func ctlFloat(name string, field func(*Control) *float64) ControlField {
	return ControlField{name,
		func(c Control) string { return strconv.FormatFloat(*field(&c), 'g', -1, 64) },
		func(c *Control, v string) (err error) { *field(c), err = strconv.ParseFloat(v, 64); return err }}
}

func ctlInt(name string, field func(*Control) *int64) ControlField {
	return ControlField{name,
		func(c Control) string { return strconv.FormatInt(*field(&c), 10) },
		func(c *Control, v string) (err error) { *field(c), err = strconv.ParseInt(v, 10, 64); return err }}
}

// SignalBuckets is the number of latency buckets in Signals: bucket i holds
// latencies up to SignalBound(i), 250 µs × 2^(i/8) (9 % wide; the last,
// from 15 s up, holds everything longer).
const SignalBuckets = 128

// SignalBound is the upper bound of latency bucket i.
func SignalBound(i int) time.Duration {
	return time.Duration(float64(250*time.Microsecond) * math.Exp2(float64(i)/8))
}

// MaxSignalLatency is the longest latency a report may carry.
const MaxSignalLatency = time.Hour

// Signals are origin latency samples and errors, pooled per room in the
// store between controller steps: a fixed histogram, so that pooling is an
// addition and instances merge exactly.
type Signals struct {
	Count   int64 // latency samples
	Errors  int64 // failed origin requests (5xx, no answer)
	Buckets [SignalBuckets]int64
}

// Bucket returns the bucket index of a latency.
func Bucket(d time.Duration) int {
	if d <= SignalBound(0) {
		return 0
	}
	i := int(math.Ceil(8 * math.Log2(float64(d)/float64(250*time.Microsecond))))
	return min(max(i, 0), SignalBuckets-1)
}

// Add records one latency sample, and an error if failed.
func (s *Signals) Add(d time.Duration, failed bool) {
	s.Count++
	s.Buckets[Bucket(d)]++
	if failed {
		s.Errors++
	}
}

// Merge adds o's samples to s (sign -1 subtracts them).
func (s *Signals) Merge(o Signals, sign int64) {
	s.Count += sign * o.Count
	s.Errors += sign * o.Errors
	for i := range s.Buckets {
		s.Buckets[i] += sign * o.Buckets[i]
	}
}

// Quantile returns the latency below which a share q of the samples fall,
// interpolated geometrically within its bucket (within 9 %); 0 when empty.
func (s Signals) Quantile(q float64) time.Duration {
	if s.Count <= 0 {
		return 0
	}
	rank := q * float64(s.Count)
	var seen float64
	for i, n := range s.Buckets {
		if n <= 0 {
			continue
		}
		if seen+float64(n) >= rank {
			lo := float64(SignalBound(i)) / math.Exp2(1.0/8)
			frac := (rank - seen) / float64(n)
			return time.Duration(lo * math.Exp2(frac/8))
		}
		seen += float64(n)
	}
	return SignalBound(SignalBuckets - 1)
}

// SignalPairs lists s's non-zero counters as store field names and values:
// n, errors, b<i>.
func (s Signals) SignalPairs() []string {
	var out []string
	add := func(name string, v int64) {
		if v != 0 {
			out = append(out, name, strconv.FormatInt(v, 10))
		}
	}
	add("n", s.Count)
	add("errors", s.Errors)
	for i, n := range s.Buckets {
		add("b"+strconv.Itoa(i), n)
	}
	return out
}

// SetSignal sets the counter that SignalPairs names name; unknown names are
// ignored.
func (s *Signals) SetSignal(name string, v int64) {
	switch {
	case name == "n":
		s.Count = v
	case name == "errors":
		s.Errors = v
	case len(name) > 1 && name[0] == 'b':
		if i, err := strconv.Atoi(name[1:]); err == nil && i >= 0 && i < SignalBuckets {
			s.Buckets[i] = v
		}
	}
}
