// Package capacity is usher's sizing arithmetic (seed 002): from the site's
// concurrency limit (its connection pool) and service time, Make derives with
// Little's law (L = λ × W) the throughput the site sustains, the active-set
// size for a time-to-live, and an admission batch and interval, as a room
// configuration that PUT /api/v1/rooms/{room} accepts; MakeScale adds what a
// sale of N visitors costs at its peak (store memory and calls, polls,
// instances, bandwidth).
//
// The numbers are a starting point, not a guarantee: they assume the pool is
// the only bottleneck and that the service time was measured without
// queueing (Measure does that at a concurrency below the pool). Check them
// with a load test (usher loadtest) before a sale.
package capacity

import (
	"errors"
	"fmt"
	"math"
	"time"

	"usher/internal/queue"
	"usher/internal/wire"
)

// ErrInvalid reports an input out of range.
var ErrInvalid = errors.New("capacity: invalid input")

// Input is what the operator knows about the site.
type Input struct {
	// Pool is the concurrency limit: requests served at once (the database
	// connection pool in seed 002).
	Pool int `json:"pool"`
	// ServiceTime is the time one request holds the pool (seed 002 takes the
	// p95 measured without queueing, to be conservative).
	ServiceTime time.Duration `json:"-"`
	// Margin scales the throughput and the burst (seed 002: 0.7).
	Margin float64 `json:"margin"`
	// TTL is how long an admitted visitor stays active (usher's active TTL).
	TTL time.Duration `json:"-"`
	// Batch is the preferred number of visitors admitted at once; Interval
	// the preferred time between admission steps. Give one or neither
	// (then the batch comes from BurstTarget).
	Batch    int           `json:"batch,omitempty"`
	Interval time.Duration `json:"-"`
	// BurstTarget is the longest a burst of one batch may take to be served
	// when neither Batch nor Interval is given (seed 002: 500 ms).
	BurstTarget time.Duration `json:"-"`
	// RequestsPerVisitor is how many pool-holding requests an admitted
	// visitor makes (seed 002: 1). Admission rate = TPS ÷ this.
	RequestsPerVisitor float64 `json:"requests_per_visitor"`
	// Round rounds the TPS down to a round number (within 10 %), as seed 002
	// turns 92 into 90.
	Round bool `json:"round"`
	// RoundInterval keeps seed 002's rounded-up interval (389 ms → 500 ms)
	// in the room configuration, lowering the admission rate to batch ÷
	// interval; otherwise the room keeps the rate and a whole-millisecond
	// interval no longer than batch ÷ rate.
	RoundInterval bool `json:"round_interval"`
}

// DefaultInput has seed 002's margins and choices; Pool and ServiceTime
// have no default.
func DefaultInput() Input {
	return Input{Margin: 0.7, TTL: 3 * time.Minute, BurstTarget: 500 * time.Millisecond, RequestsPerVisitor: 1, Round: true}
}

// Validate reports the first input out of range.
func (in Input) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	switch {
	case in.Pool < 1:
		return bad("pool %d: want at least 1", in.Pool)
	case in.ServiceTime <= 0:
		return bad("service time %v: want more than 0", in.ServiceTime)
	case !(in.Margin > 0 && in.Margin <= 1):
		return bad("margin %v: want more than 0 and at most 1", in.Margin)
	case in.TTL < queue.MinActiveTTL || in.TTL > queue.MaxActiveTTL:
		return bad("ttl %v: want %v to %v", in.TTL, queue.MinActiveTTL, queue.MaxActiveTTL)
	case in.Batch < 0:
		return bad("batch %d: want at least 1", in.Batch)
	case in.Batch > 0 && in.Interval > 0:
		return bad("give a batch or an interval, not both")
	case in.Interval != 0 && (in.Interval < queue.MinInterval || in.Interval > queue.MaxInterval):
		return bad("interval %v: want %v to %v", in.Interval, queue.MinInterval, queue.MaxInterval)
	case in.Batch == 0 && in.Interval == 0 && in.BurstTarget < in.ServiceTime:
		return bad("burst target %v: want at least the service time %v", in.BurstTarget, in.ServiceTime)
	case !(in.RequestsPerVisitor >= 1):
		return bad("requests per visitor %v: want at least 1", in.RequestsPerVisitor)
	}
	return nil
}

// Step is one line of the reasoning.
type Step struct {
	Title  string `json:"title"`
	Detail string `json:"detail"`
}

// Plan is the planner's result.
type Plan struct {
	Input Input `json:"input"`
	// RawTPS = Pool ÷ ServiceTime (requests/s); SafeTPS = RawTPS × Margin;
	// TPS is SafeTPS, rounded down when Input.Round.
	RawTPS  float64 `json:"raw_tps"`
	SafeTPS float64 `json:"safe_tps"`
	TPS     float64 `json:"tps"`
	// AdmitRate is the planned admission rate in visitors/s.
	AdmitRate float64 `json:"admit_rate"`
	// MaxActive = AdmitRate × TTL (Little's law), rounded down.
	MaxActive int64 `json:"max_active"`
	// Batch is the visitors admitted at once; RawInterval = Batch ÷
	// AdmitRate; RoundedInterval is it rounded up as seed 002 does.
	Batch           int64         `json:"batch"`
	RawInterval     time.Duration `json:"-"`
	RoundedInterval time.Duration `json:"-"`
	// Room is the configuration for usher, whose step admits at most
	// ceil(admit_rate × interval) visitors (its batch); RoomBatch is that.
	Room      wire.RoomSettings `json:"room"`
	room      queue.Settings    // Room, as the queue's settings
	RoomBatch int64             `json:"room_batch"`
	Steps     []Step            `json:"steps"`
	// Notes warn about clamped values.
	Notes []string `json:"notes,omitempty"`
}

// Make computes a plan.
func Make(in Input) (Plan, error) {
	if err := in.Validate(); err != nil {
		return Plan{}, err
	}
	p := Plan{Input: in}
	w := in.ServiceTime.Seconds()
	intervalStep := -1 // the Interval step, when the interval is derived
	step := func(title, format string, args ...any) {
		p.Steps = append(p.Steps, Step{Title: title, Detail: fmt.Sprintf(format, args...)})
	}

	// 1. Throughput from Little's law on the pool: λ = L ÷ W.
	p.RawTPS = float64(in.Pool) / w
	step("Stable throughput", "λ = L ÷ W = %d (pool) ÷ %s (service time) = %s req/s",
		in.Pool, fmtSeconds(w), fmtNum(p.RawTPS))

	// 2. Safety margin.
	p.SafeTPS = p.RawTPS * in.Margin
	p.TPS = p.SafeTPS
	if in.Round {
		p.TPS = FloorRound(p.SafeTPS)
		step("Safety margin", "%s × %s = %s req/s, rounded down to %s req/s",
			fmtNum(p.RawTPS), fmtNum(in.Margin), fmtNum(p.SafeTPS), fmtNum(p.TPS))
	} else {
		step("Safety margin", "%s × %s = %s req/s", fmtNum(p.RawTPS), fmtNum(in.Margin), fmtNum(p.SafeTPS))
	}
	p.AdmitRate = p.TPS / in.RequestsPerVisitor
	if in.RequestsPerVisitor != 1 {
		step("Admission rate", "each admitted visitor makes %s requests: %s ÷ %s = %s visitors/s",
			fmtNum(in.RequestsPerVisitor), fmtNum(p.TPS), fmtNum(in.RequestsPerVisitor), fmtNum(p.AdmitRate))
	}
	if p.AdmitRate > queue.MaxAdmitRate {
		p.Notes = append(p.Notes, fmt.Sprintf("admission rate %s capped at usher's %d/s", fmtNum(p.AdmitRate), queue.MaxAdmitRate))
		p.AdmitRate = queue.MaxAdmitRate
	}

	// 3. Active set: L = λ × W with W the TTL.
	active := p.AdmitRate * in.TTL.Seconds()
	p.MaxActive = int64(math.Floor(active + 1e-9))
	step("Active set", "L = λ × W = %s visitors/s × %s (active TTL) = %s visitors",
		fmtNum(p.AdmitRate), fmtSeconds(in.TTL.Seconds()), fmtInt(p.MaxActive))
	if p.MaxActive < 1 {
		p.MaxActive = 1
		p.Notes = append(p.Notes, "max_active raised to 1")
	}
	if p.MaxActive > queue.MaxMaxActive {
		p.Notes = append(p.Notes, fmt.Sprintf("max_active %s capped at usher's %s", fmtInt(p.MaxActive), fmtInt(queue.MaxMaxActive)))
		p.MaxActive = queue.MaxMaxActive
	}

	// 4. Batch and interval: batch = λ × interval.
	switch {
	case in.Interval > 0:
		p.RawInterval, p.RoundedInterval = in.Interval, in.Interval
		p.Batch = max(1, int64(math.Ceil(p.AdmitRate*in.Interval.Seconds()-1e-9)))
		step("Batch", "batch = λ × interval = %s/s × %s = %d visitors per step",
			fmtNum(p.AdmitRate), fmtSeconds(in.Interval.Seconds()), p.Batch)
	default:
		if in.Batch > 0 {
			p.Batch = int64(in.Batch)
			step("Batch", "%d visitors at once (given)", p.Batch)
		} else {
			// A burst of B requests on a pool of L with service time W is served
			// in ⌈B ÷ L⌉ × W: the largest B within the target, with the margin,
			// in visitors of RequestsPerVisitor requests each.
			waves := math.Floor(in.BurstTarget.Seconds()/w + 1e-9)
			burst := float64(in.Pool) * waves
			p.Batch = max(1, int64(math.Floor(burst*in.Margin/in.RequestsPerVisitor+1e-9)))
			perVisitor := ""
			if in.RequestsPerVisitor != 1 {
				perVisitor = " ÷ " + fmtNum(in.RequestsPerVisitor) + " requests per visitor"
			}
			step("Batch", "a burst of B requests on a pool of %d is served in ⌈B ÷ %d⌉ × %s: within %s for B ≤ %d × %s = %s; × %s%s = %d visitors",
				in.Pool, in.Pool, fmtSeconds(w), fmtSeconds(in.BurstTarget.Seconds()), in.Pool, fmtNum(waves),
				fmtNum(burst), fmtNum(in.Margin), perVisitor, p.Batch)
		}
		p.RawInterval = time.Duration(float64(p.Batch) / p.AdmitRate * float64(time.Second))
		p.RoundedInterval = CeilRound(p.RawInterval)
		// Its detail is finished below, once the room's interval is known:
		// it says which interval the room uses, and why.
		intervalStep = len(p.Steps)
		step("Interval", "interval = batch ÷ λ = %d ÷ %s/s = %s", p.Batch, fmtNum(p.AdmitRate), fmtDuration(p.RawInterval))
	}

	// 5. The room: usher admits at most ceil(admit_rate × interval) per step
	// from a token bucket refilled at admit_rate.
	p.room = queue.DefaultSettings()
	p.room.State, p.room.MaxActive = queue.Open, p.MaxActive
	p.room.ActiveTTL, p.room.ClaimWindow = in.TTL, min(p.room.ClaimWindow, in.TTL)
	var interval time.Duration
	rate := p.AdmitRate
	switch {
	case in.Interval > 0:
		interval = in.Interval
		step("Room", "admit_rate %s/s, interval_ms %d: usher admits up to ceil(%s × %s) = %d per step",
			fmtNum(rate), interval.Milliseconds(), fmtNum(rate), fmtSeconds(interval.Seconds()), usherBatch(rate, interval))
	case in.RoundInterval:
		interval = clampInterval(p.RoundedInterval)
		rate = float64(p.Batch) / interval.Seconds()
		step("Room", "as seed 002: %d visitors every %s, so admit_rate = %d ÷ %s = %s/s (%s below λ); usher admits up to ceil(%s × %s) = %d per step",
			p.Batch, fmtDuration(interval), p.Batch, fmtSeconds(interval.Seconds()), fmtNum(rate),
			fmtPercent(1-rate/p.AdmitRate), fmtNum(rate), fmtSeconds(interval.Seconds()), usherBatch(rate, interval))
	default:
		// The longest whole-millisecond interval whose batch is at most Batch.
		interval = clampInterval(time.Duration(math.Floor(float64(p.Batch)/rate*1000+1e-9)) * time.Millisecond)
		for interval > queue.MinInterval && usherBatch(rate, interval) > p.Batch {
			interval -= time.Millisecond
		}
		step("Room", "usher admits up to ceil(admit_rate × interval) per step, admit_rate per second on average: "+
			"admit_rate %s, interval_ms %d → ceil(%s × %s) = %d per step, keeping λ "+
			"(seed 002's %s would lower the rate to %s/s)",
			fmtNum(rate), interval.Milliseconds(), fmtNum(rate), fmtSeconds(interval.Seconds()), usherBatch(rate, interval),
			fmtDuration(p.RoundedInterval), fmtNum(float64(p.Batch)/clampInterval(p.RoundedInterval).Seconds()))
	}
	if intervalStep >= 0 {
		if in.RoundInterval {
			p.Steps[intervalStep].Detail += fmt.Sprintf("; the room uses %s, seed 002's rounding up (--round-interval), which lowers the rate to %s/s",
				fmtDuration(interval), fmtNum(rate))
		} else {
			p.Steps[intervalStep].Detail += fmt.Sprintf("; the room uses %s, the longest whole millisecond that admits at most %d per step, to keep λ",
				fmtDuration(interval), p.Batch)
			if p.RoundedInterval != interval {
				p.Steps[intervalStep].Detail += fmt.Sprintf(" (seed 002 rounds up to %s)", fmtDuration(p.RoundedInterval))
			}
		}
	}
	if interval != p.RoundedInterval && (p.RoundedInterval < queue.MinInterval || p.RoundedInterval > queue.MaxInterval) {
		p.Notes = append(p.Notes, fmt.Sprintf("interval kept within usher's %v to %v", queue.MinInterval, queue.MaxInterval))
	}
	if rate > queue.MaxAdmitRate {
		rate = queue.MaxAdmitRate
	}
	admitRate := roundTo(rate, 3)
	p.room.AdmitRate, p.room.Interval = admitRate, interval.Truncate(time.Millisecond)
	p.Room = roomJSON(p.room)
	p.RoomBatch = usherBatch(admitRate, interval)
	if p.RoomBatch > p.Batch {
		p.Notes = append(p.Notes, fmt.Sprintf("usher's shortest interval (%v) admits up to %d per step, above the batch %d", queue.MinInterval, p.RoomBatch, p.Batch))
	}
	return p, nil
}

// usherBatch is what a room with this rate and interval admits per step.
func usherBatch(rate float64, interval time.Duration) int64 {
	return queue.Settings{AdmitRate: rate, Interval: interval}.Batch()
}

func clampInterval(d time.Duration) time.Duration {
	return min(max(d, queue.MinInterval), queue.MaxInterval)
}

// FloorRound rounds x down to a multiple of the largest 1, 2 or 5 × 10ⁿ
// that is at most a tenth of x, so it loses less than 10 %: 92.1 → 90,
// 131.6 → 130, 29 → 28.
func FloorRound(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 0) {
		return x
	}
	s := niceStepBelow(x / 10)
	return math.Floor(x/s+1e-9) * s
}

func niceStepBelow(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{5, 2, 1} {
		if m*p <= x*(1+1e-12) {
			return m * p
		}
	}
	return p
}

// CeilRound rounds d up to the next 1, 2 or 5 × 10ⁿ milliseconds (or
// microseconds below a millisecond): 389 ms → 500 ms, 120 ms → 200 ms.
func CeilRound(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	unit := float64(time.Millisecond)
	if d < time.Millisecond {
		unit = float64(time.Microsecond)
	}
	x := float64(d) / unit
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x*(1-1e-12) {
			return time.Duration(m * p * unit)
		}
	}
	return d
}

func roundTo(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// roomSettings are the settings a plan configures, by the queue's names.
var roomSettings = []string{"state", "max_active", "admit_rate", "interval_ms", "active_ttl_seconds", "claim_window_seconds"}

// roomJSON is s's roomSettings as the API takes them.
func roomJSON(s queue.Settings) wire.RoomSettings {
	var out wire.RoomSettings
	for _, name := range roomSettings {
		f, _ := queue.LookupField(name)
		v, _ := f.Get(s)
		out = out.With(name, v)
	}
	return out
}
