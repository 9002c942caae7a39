package queue_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"usher/internal/queue"
)

// plant is a simulated origin behind a waiting room, deterministic (seeded
// random numbers, a clock that moves in ticks): admitted visitors notice
// their admission after a poll delay, then each makes Calls requests back
// to back on a pool of Conns connections (service time lognormal, median
// 50 ms, σ 0.25, as usher origin's default). The pool's utilisation is the
// visitors in session ÷ Conns; a request's latency is its service time plus
// a wait that grows as the pool fills (Sakasegawa's M/M/c approximation of
// the mean wait, exponentially distributed), plus the backlog's wait when
// the offered load exceeds the pool.
type plant struct {
	rng     *rand.Rand
	conns   float64
	calls   float64
	delay   int       // ticks from admission to the first request
	pending []float64 // visitors admitted per tick, not yet in session
	session []float64 // visitors in session, by tick started
	backlog float64   // connection-seconds of work queued beyond the pool
	busy    float64   // connection-seconds used, summed
	offered float64   // connection-seconds of capacity, summed
}

const (
	tick   = 100 * time.Millisecond
	median = 50 * time.Millisecond
	sigma  = 0.25
)

var meanService = time.Duration(float64(median) * math.Exp(sigma*sigma/2))

func newPlant(conns float64, delay time.Duration) *plant {
	p := &plant{rng: rand.New(rand.NewPCG(1, 2)), conns: conns, calls: 10, delay: int(delay / tick)}
	p.pending = make([]float64, p.delay)
	// A session lasts Calls × the mean service time.
	p.session = make([]float64, int(math.Ceil(p.calls*meanService.Seconds()/tick.Seconds())))
	return p
}

// step admits admitted visitors in this tick and adds the latencies of the
// tick's requests to sig.
func (p *plant) step(admitted float64, sig *queue.Signals) {
	starting := p.pending[0]
	copy(p.pending, p.pending[1:])
	p.pending[len(p.pending)-1] = admitted
	copy(p.session[1:], p.session)
	p.session[0] = starting
	var inSession float64
	for _, n := range p.session {
		inSession += n
	}
	dt := tick.Seconds()
	load := inSession // connections wanted
	p.backlog = max(0, p.backlog+(load-p.conns)*dt)
	used := min(load, p.conns)
	if p.backlog > 0 {
		used = p.conns
	}
	p.busy += used * dt
	p.offered += p.conns * dt
	rho := min(used/p.conns, 0.995)
	c := p.conns
	meanWait := meanService.Seconds() * math.Pow(rho, math.Sqrt(2*(c+1))-1) / (c * (1 - rho))
	backlogWait := p.backlog / p.conns
	// Requests this tick: those in session, one per mean service time.
	n := load * dt / meanService.Seconds()
	whole := int(n)
	if p.rng.Float64() < n-float64(whole) {
		whole++
	}
	for range whole {
		svc := float64(median) * math.Exp(sigma*p.rng.NormFloat64())
		wait := p.rng.ExpFloat64() * meanWait * float64(time.Second)
		sig.Add(time.Duration(svc+wait+backlogWait*float64(time.Second)), false)
	}
}

// utilisation returns the pool's utilisation since the last call.
func (p *plant) utilisation() float64 {
	u := p.busy / p.offered
	p.busy, p.offered = 0, 0
	return u
}

// phaseResult is what a simulated phase showed once settled.
type phaseResult struct {
	conns       float64
	p95         time.Duration // of the settled part's samples
	util        float64
	rate        float64 // mean rate set
	reversals   int     // changes of the rate's direction
	swing       float64 // highest ÷ lowest rate
	capacityPS  float64 // visitors per second the pool serves
	unloadedP95 time.Duration
}

// simulate runs the room's controller (or a static rate when set is
// static) against the plant through phases of the given pool sizes, each
// phaseLen long, and reports each phase's last settled part.
func simulate(t *testing.T, set queue.Settings, phases []float64, phaseLen, settle, delay time.Duration) []phaseResult {
	t.Helper()
	p := newPlant(phases[0], delay)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var c queue.Control
	var pool queue.Signals
	var admitted float64
	tokens := 0.0
	var out []phaseResult
	for _, conns := range phases {
		p.conns = conns
		res := phaseResult{conns: conns, capacityPS: conns / (p.calls * meanService.Seconds())}
		var settled queue.Signals
		var rateSum, lo, hi float64
		var rateN int
		lastRate, lastDir := set.CurrentRate(c), 0
		for i := range int(phaseLen / tick) {
			now = now.Add(tick)
			rate := set.CurrentRate(c)
			tokens += rate * tick.Seconds()
			n := math.Floor(tokens)
			tokens -= n
			admitted += n
			var sig queue.Signals
			p.step(n, &sig)
			pool.Merge(sig, 1)
			inSettled := time.Duration(i)*tick >= settle
			if inSettled {
				settled.Merge(sig, 1)
				rateSum += rate
				rateN++
				if rateN == 1 || rate < lo {
					lo = rate
				}
				hi = max(hi, rate)
				if i == int(settle/tick) {
					p.utilisation()
				}
			}
			if set.ControlDue(c, now) {
				next, used := set.Step(c, queue.Window{Signals: pool, Waiting: 1000, Admitted: int64(admitted)}, now)
				if used {
					c, pool = next, queue.Signals{}
				}
				if r := set.CurrentRate(c); r != lastRate {
					dir := 1
					if r < lastRate {
						dir = -1
					}
					if inSettled && lastDir != 0 && dir != lastDir {
						res.reversals++
					}
					lastRate, lastDir = r, dir
				}
			}
		}
		res.p95, res.util, res.rate, res.swing = settled.Quantile(0.95), p.utilisation(), rateSum/float64(rateN), hi/lo
		out = append(out, res)
	}
	return out
}

func adaptiveSettings() queue.Settings {
	set := queue.DefaultSettings()
	set.Admission, set.AdmitRate, set.MinAdmitRate, set.MaxAdmitRate = queue.Adaptive, 5, 1, 100
	return set
}

// unloadedP95 is the plant's p95 with no wait: the service time's.
var unloadedP95 = time.Duration(float64(median) * math.Exp(sigma*1.6449))

// bestStatic returns the highest static rate (in steps of 2 %) whose
// settled p95 on a pool of conns stays within target: the best an operator
// who knew the pool could have typed in.
func bestStatic(t *testing.T, conns float64, target time.Duration) (float64, phaseResult) {
	set := adaptiveSettings()
	set.Admission = queue.Static
	capacity := conns / (10 * meanService.Seconds())
	var best float64
	var res phaseResult
	for rate := 0.3 * capacity; rate <= capacity; rate *= 1.02 {
		set.AdmitRate = rate
		r := simulate(t, set, []float64{conns}, 60*time.Second, 30*time.Second, time.Second)[0]
		if r.p95 <= target {
			best, res = rate, r
		}
	}
	return best, res
}

// TestControllerOnSimulatedPlant: on an origin whose pool goes 10 → 5 → 10
// connections, the controller holds each phase's p95 at or below its
// target (1.5 × the unloaded p95 it learns) while admitting at least 85 %
// of the best static rate for that pool (found by a sweep, in hindsight),
// and its rate settles instead of oscillating: once settled it stays
// within ±15 % (highest ÷ lowest ≤ 1.35; TestControlPeriodAgainstDelay
// shows an oscillating loop's 2.7). The small corrections inside that
// range (at most 5 changes of direction in 15 steps) follow the noise of
// windows of 100-odd samples. The same run with a static rate sized
// for the first phase breaks in the second.
func TestControllerOnSimulatedPlant(t *testing.T) {
	phases := []float64{10, 5, 10}
	const phaseLen, settle = 60 * time.Second, 30 * time.Second
	target := time.Duration(queue.LearnedTargetFactor * float64(unloadedP95))
	adaptive := simulate(t, adaptiveSettings(), phases, phaseLen, settle, time.Second)
	for i, r := range adaptive {
		best, b := bestStatic(t, r.conns, target)
		t.Logf("adaptive phase %d (conns %v): p95 %v (%.2f× unloaded), utilisation %.2f, rate %.2f/s (best static %.2f/s: utilisation %.2f, p95 %.2f×; capacity %.2f/s), %d reversals, swing %.2f",
			i+1, r.conns, r.p95.Round(time.Millisecond), float64(r.p95)/float64(unloadedP95), r.util, r.rate,
			best, b.util, float64(b.p95)/float64(unloadedP95), r.capacityPS, r.reversals, r.swing)
		if r.p95 > target {
			t.Errorf("phase %d: p95 %v, want at most the target %v", i+1, r.p95, target)
		}
		if r.rate < 0.85*best {
			t.Errorf("phase %d: rate %.2f/s, want at least 85 %% of the best static rate %.2f/s", i+1, r.rate, best)
		}
		if r.reversals > 5 || r.swing > 1.35 {
			t.Errorf("phase %d: once settled the rate changed direction %d times and swung by %.2f, want at most 5 and 1.35", i+1, r.reversals, r.swing)
		}
	}
	static := adaptiveSettings()
	static.Admission, static.AdmitRate = queue.Static, adaptive[0].rate
	fixed := simulate(t, static, phases, phaseLen, settle, time.Second)
	for i, r := range fixed {
		t.Logf("static %.2f/s phase %d (conns %v): p95 %v (%.2f× unloaded), utilisation %.2f",
			static.AdmitRate, i+1, r.conns, r.p95.Round(time.Millisecond), float64(r.p95)/float64(unloadedP95), r.util)
	}
	if fixed[1].p95 < 2*target {
		t.Errorf("static rate in the small phase: p95 %v, want it to break the target %v by far", fixed[1].p95, target)
	}
}

// TestStep: one case per branch of the control law.
func TestStep(t *testing.T) {
	set := adaptiveSettings()
	set.TargetP95 = 100 * time.Millisecond
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(set.ControlPeriod)
	window := func(latency time.Duration, n, errs int) queue.Signals {
		var s queue.Signals
		for i := range n {
			s.Add(latency, i < errs)
		}
		return s
	}
	prev := queue.Control{Rate: 10, At: t0, Admitted: 100, Version: 3}
	demand := queue.Window{Waiting: 5, Admitted: 120} // 20 in 2 s at 10/s
	tests := []struct {
		name     string
		c        queue.Control
		w        queue.Window
		at       time.Time
		used     bool
		rate     float64 // -f: 10 × f ÷ (p95 ÷ target), the law's proportional branch
		hold     int64
		baseline time.Duration
	}{
		{"first step starts the clock", queue.Control{}, queue.Window{Admitted: 7}, now, true, 5, 0, 0},
		{"too few samples: keep pooling", prev, queue.Window{Signals: window(time.Second, 19, 0)}, now, false, 10, 0, 0},
		{"too few samples for long: hold", prev, queue.Window{Signals: window(time.Second, 19, 0)}, t0.Add(5 * set.ControlPeriod), true, 10, 0, 0},
		{"above target: decrease to aim inside the band", prev, withSignals(demand, window(150*time.Millisecond, 100, 0)), now, true, -0.9, 1, 0},
		{"far above target: halve at most", prev, withSignals(demand, window(time.Second, 100, 0)), now, true, 5, 1, 0},
		{"above target but below the last window's p95: the backlog drains, hold", queue.Control{Rate: 10, At: t0, Admitted: 100, Version: 3, P95: time.Second}, withSignals(demand, window(200*time.Millisecond, 100, 0)), now, true, 10, 0, 0},
		{"above target and above the last window's p95: decrease", queue.Control{Rate: 10, At: t0, Admitted: 100, Version: 3, P95: 100 * time.Millisecond}, withSignals(demand, window(time.Second, 100, 0)), now, true, 5, 1, 0},
		{"errors count as overload", prev, withSignals(demand, window(50*time.Millisecond, 100, 6)), now, true, 5, 1, 0},
		{"in the band: hold", prev, withSignals(demand, window(90*time.Millisecond, 100, 0)), now, true, 10, 0, 0},
		{"below the band with demand: increase", prev, withSignals(demand, window(70*time.Millisecond, 100, 0)), now, true, -0.8, 0, 0},
		{"far below: by 25 % at most", prev, withSignals(demand, window(10*time.Millisecond, 100, 0)), now, true, 12.5, 0, 0},
		{"below the band, nobody waits: hold", prev, queue.Window{Signals: window(10*time.Millisecond, 100, 0), Admitted: 120}, now, true, 10, 0, 0},
		{"below the band, rate not used (max_active binds): hold", prev, queue.Window{Signals: window(10*time.Millisecond, 100, 0), Waiting: 5, Admitted: 110}, now, true, 10, 0, 0},
		{"after a decrease: skip one step", queue.Control{Rate: 10, At: t0, Admitted: 100, Version: 3, Hold: 1}, withSignals(demand, window(time.Second, 100, 0)), now, true, 10, 0, 0},
		{"the rate stays within max_admit_rate", queue.Control{Rate: 90, At: t0, Admitted: 0, Version: 3}, queue.Window{Signals: window(10*time.Millisecond, 100, 0), Waiting: 5, Admitted: 1000}, now, true, 100, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next, used := set.Step(tc.c, tc.w, tc.at)
			if used != tc.used {
				t.Fatalf("used = %v, want %v", used, tc.used)
			}
			if !used {
				if next != tc.c {
					t.Errorf("unused step changed the state: %+v, want %+v", next, tc.c)
				}
				return
			}
			want := tc.rate
			if want < 0 {
				want = 10 * -want / (float64(next.P95) / float64(set.TargetP95))
			}
			if math.Abs(next.Rate-want) > 1e-9 || next.Hold != tc.hold || next.Version != tc.c.Version+1 || !next.At.Equal(tc.at) {
				t.Errorf("next = %+v, want rate %v, hold %d, version %d, at %v", next, want, tc.hold, tc.c.Version+1, tc.at)
			}
			if next.Admitted != tc.w.Admitted {
				t.Errorf("next.Admitted = %d, want %d", next.Admitted, tc.w.Admitted)
			}
		})
	}
}

func withSignals(w queue.Window, s queue.Signals) queue.Window {
	w.Signals = s
	return w
}

// TestLearnedTarget: without target_p95 the target is 1.5 × the learned
// baseline: the first window's p95, then halfway down to each lower one; a
// higher p95, or a window too small to decide on, leaves it.
func TestLearnedTarget(t *testing.T) {
	set := adaptiveSettings()
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c := queue.Control{Rate: 10, At: t0, Version: 1}
	window := func(ms, n int) queue.Signals {
		var s queue.Signals
		for range n {
			s.Add(time.Duration(ms)*time.Millisecond, false)
		}
		return s
	}
	var baselines []time.Duration
	for i, w := range []queue.Signals{window(10, queue.MinSamples-1), window(80, 100), window(60, 100), window(300, 100), window(60, 100), window(60, 100)} {
		c, _ = set.Step(c, queue.Window{Signals: w}, t0.Add(time.Duration(i+1)*set.ControlPeriod))
		baselines = append(baselines, c.Baseline)
	}
	p80, p60 := window(80, 100).Quantile(0.95), window(60, 100).Quantile(0.95)
	want := []time.Duration{0, p80, p80 - (p80-p60)/2, p80 - (p80-p60)/2, p80 - 3*(p80-p60)/4, p80 - 7*(p80-p60)/8}
	for i := range want {
		if baselines[i] != want[i] {
			t.Errorf("baseline after window %d = %v, want %v", i+1, baselines[i], want[i])
		}
	}
	if got, want := set.Target(c), time.Duration(1.5*float64(c.Baseline)); got != want {
		t.Errorf("target %v, want 1.5 × the baseline %v", got, c.Baseline)
	}
}

// TestSignalsQuantile: the histogram's quantiles are within its bucket
// width (9 %) of the exact ones, and Merge subtracts exactly.
func TestSignalsQuantile(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var s queue.Signals
	var xs []float64
	for range 10000 {
		d := time.Duration(float64(median) * math.Exp(sigma*rng.NormFloat64()))
		s.Add(d, false)
		xs = append(xs, float64(d))
	}
	exact := time.Duration(float64(median) * math.Exp(sigma*1.6449))
	if got := s.Quantile(0.95); math.Abs(float64(got)/float64(exact)-1) > 0.09 {
		t.Errorf("p95 = %v, want %v within 9 %%", got, exact)
	}
	var o queue.Signals
	o.Add(time.Hour, true)
	sum := s
	sum.Merge(o, 1)
	sum.Merge(o, -1)
	if sum != s {
		t.Error("Merge(o, 1) then Merge(o, -1) did not give back s")
	}
	if queue.Bucket(0) != 0 || queue.Bucket(24*time.Hour) != queue.SignalBuckets-1 {
		t.Error("Bucket does not clamp to its range")
	}
}

// TestControlPeriodAgainstDelay: the control period must exceed the delay
// from an admission to the visitor's requests. With visitors who reach the
// origin 2.5 s after admission, a 3 s period settles as on a quick plant;
// a 1 s period, shorter than the delay, raises the rate again before it
// sees its last rise, overshoots, and swings by far more.
func TestControlPeriodAgainstDelay(t *testing.T) {
	phases := []float64{10, 5, 10}
	const phaseLen, settle, delay = 60 * time.Second, 30 * time.Second, 2500 * time.Millisecond
	target := time.Duration(queue.LearnedTargetFactor * float64(unloadedP95))
	set := adaptiveSettings()
	set.ControlPeriod = 3 * time.Second
	for i, r := range simulate(t, set, phases, phaseLen, settle, delay) {
		t.Logf("period 3 s, delay 2.5 s, phase %d (conns %v): p95 %.2f× unloaded, utilisation %.2f, rate %.2f/s, %d reversals, swing %.2f",
			i+1, r.conns, float64(r.p95)/float64(unloadedP95), r.util, r.rate, r.reversals, r.swing)
		if r.p95 > target || r.reversals > 5 || r.swing > 1.35 {
			t.Errorf("period 3 s, phase %d: p95 %v (target %v), %d reversals, swing %.2f; want within target, ≤ 5, ≤ 1.35",
				i+1, r.p95, target, r.reversals, r.swing)
		}
	}
	set.ControlPeriod = time.Second
	var worst float64
	for i, r := range simulate(t, set, phases, phaseLen, settle, delay) {
		t.Logf("period 1 s, delay 2.5 s, phase %d (conns %v): p95 %.2f× unloaded, utilisation %.2f, rate %.2f/s, %d reversals, swing %.2f",
			i+1, r.conns, float64(r.p95)/float64(unloadedP95), r.util, r.rate, r.reversals, r.swing)
		worst = max(worst, r.swing)
	}
	if worst < 2 {
		t.Errorf("period 1 s against a 2.5 s delay: largest swing %.2f; want the short period to show its overshoot (≥ 2)", worst)
	}
}
