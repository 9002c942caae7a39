package queue_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/queue"
	"usher/internal/queue/forecast"
	"usher/internal/queue/memqueue"
)

func TestForecast(t *testing.T) {
	s := queue.DefaultSettings() // 50/s configured, 1 s steps
	v := queue.View{Stats: queue.Stats{Settings: s, Waiting: 2000}, Rates: forecast.Rates{Rate: 100}}
	// 1,000 places at 100/s: 10 s, plus half a poll interval; the range is
	// half a step earlier, and half a step and a poll interval later.
	want := queue.Forecast{ETA: 10750 * time.Millisecond, Low: 9500 * time.Millisecond, High: 12300 * time.Millisecond}
	if got := v.Forecast(1000); !near(got, want) {
		t.Errorf("Forecast(1000) at 100/s = %+v, want %+v", got, want)
	}

	v.Rate = 0 // stalled: floored at 5 % of the configured 50/s
	if got, want := v.Forecast(250).ETA, 100750*time.Millisecond; !nearD(got, want) {
		t.Errorf("ETA with a stalled room = %v, want %v", got, want)
	}

	// 10 visitors a second leave a line of 1,000 (1 % each per second):
	// the 1,000 ahead are gone after ln(1 + 0.01 × 1000 ÷ 10) ÷ 0.01 s.
	v = queue.View{Stats: queue.Stats{Settings: s, Waiting: 1000}, Rates: forecast.Rates{Rate: 10, Leave: 10}}
	wantT := math.Log(2) / 0.01
	if got := v.Forecast(1000).ETA.Seconds(); math.Abs(got-wantT-0.75) > 1e-6 {
		t.Errorf("ETA with 1 %%/s leaving = %.3f s, want %.3f s (100.75 s without leaving)", got, wantT+0.75)
	}

	// Variance widens the range, more for a short wait than a long one
	// relative to the wait (the mean rate over a longer wait varies less).
	v = queue.View{Stats: queue.Stats{Settings: s, Waiting: 5000}, Rates: forecast.Rates{Rate: 10}}
	narrow := v.Forecast(1000)
	v.RateVar = 4 // sd 2/s over 1 s windows
	wide := v.Forecast(1000)
	if wide.Low >= narrow.Low || wide.High <= narrow.High || wide.ETA != narrow.ETA {
		t.Errorf("rate variance: range %+v, want wider than %+v around the same ETA", wide, narrow)
	}
	rel := func(f queue.Forecast) float64 { return (f.High - f.Low).Seconds() / f.ETA.Seconds() }
	if short, long := v.Forecast(50), v.Forecast(5000); rel(short) <= rel(long) {
		t.Errorf("relative range: %.2f for 50 places, %.2f for 5,000; want the short wait's wider", rel(short), rel(long))
	}

	v.Rate, v.Settings.AdmitRate = 1e-9, 1e-9 // capped at a day
	if got := v.Forecast(1e9); got.ETA != 24*time.Hour || got.High != 24*time.Hour {
		t.Errorf("Forecast of an endless wait = %+v, want a day", got)
	}
}

func near(a, b queue.Forecast) bool {
	return nearD(a.ETA, b.ETA) && nearD(a.Low, b.Low) && nearD(a.High, b.High)
}

func nearD(a, b time.Duration) bool { return (a - b).Abs() < time.Millisecond }

// sim runs a room on a fake clock: admission steps every interval,
// refreshes every 100 ms, arrivals and leaving waiting visitors at given
// rates, and answers when a visitor is first admitted.
type sim struct {
	t       *testing.T
	q       *queue.Queue
	c       *clock
	rnd     *rand.Rand
	next    int // visitors entered so far
	waiting map[string]bool
	admitAt map[string]time.Time
	step    time.Duration
	lastAdm time.Time
}

func newSim(t *testing.T, rate float64, interval time.Duration, waiting int) *sim {
	t.Helper()
	c := &clock{t: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
	q := queue.New(memqueue.New(), queue.Options{Now: c.now})
	s := queue.DefaultSettings()
	s.AdmitRate, s.Interval, s.MaxActive = rate, interval, 10_000_000
	s.State = queue.Paused
	s.PresenceTimeout = 0 // the simulated visitors do not poll
	if err := q.PutRoom(context.Background(), "r", s); err != nil {
		t.Fatal(err)
	}
	m := &sim{t: t, q: q, c: c, rnd: rand.New(rand.NewPCG(1, 2)), waiting: map[string]bool{}, admitAt: map[string]time.Time{}, step: interval}
	for range waiting {
		m.enter()
	}
	s.State = queue.Open
	m.put(s)
	m.lastAdm = c.t
	return m
}

func (m *sim) put(s queue.Settings) {
	if err := m.q.PutRoom(context.Background(), "r", s); err != nil {
		m.t.Fatal(err)
	}
}

func (m *sim) enter() (string, queue.Entry) {
	m.next++
	id := fmt.Sprintf("v%d", m.next)
	e, _, err := m.q.Enter(context.Background(), "r", id)
	if err != nil {
		m.t.Fatal(err)
	}
	m.waiting[id] = true
	return id, e
}

// run advances the clock by d in 100 ms ticks: arrive visitors per second
// enter, and leave visitors per second among those waiting leave (never
// keep, whose wait is being measured).
func (m *sim) run(d time.Duration, arrive, leave float64, keep string) {
	ctx := context.Background()
	for end := m.c.t.Add(d); m.c.t.Before(end); {
		m.c.t = m.c.t.Add(100 * time.Millisecond)
		for range poisson(m.rnd, arrive/10) {
			m.enter()
		}
		for range poisson(m.rnd, leave/10) {
			ids := slices.Sorted(maps.Keys(m.waiting)) // a seeded pick, not map order
			if id := ids[m.rnd.IntN(len(ids))]; id != keep {
				delete(m.waiting, id)
				if err := m.q.Leave(ctx, "r", id); err != nil {
					m.t.Fatal(err)
				}
			}
		}
		if m.c.t.Sub(m.lastAdm) >= m.step {
			m.lastAdm = m.c.t
			res, err := m.q.Admit(ctx, "r")
			if err != nil {
				m.t.Fatal(err)
			}
			for _, id := range res.Admitted {
				delete(m.waiting, id)
				m.admitAt[id] = m.c.t
			}
		}
		if err := refresh(ctx, m.q); err != nil {
			m.t.Fatal(err)
		}
	}
}

func poisson(r *rand.Rand, mean float64) int {
	n, p, l := 0, r.Float64(), math.Exp(-mean)
	for p > l {
		n++
		p *= r.Float64()
	}
	return n
}

// TestForecastMatchesSimulation: a room admitting 20/s in 500 ms steps
// with visitors arriving at 15/s and leaving the line at 3/s. After a
// minute of measuring, visitors entering at various depths are admitted
// within their forecast range, and near the ETA (less the half poll
// interval, which a poll adds and this simulation does not).
func TestForecastMatchesSimulation(t *testing.T) {
	m := newSim(t, 20, 500*time.Millisecond, 1500)
	m.run(time.Minute, 15, 3, "")
	v, _ := m.q.View("r")
	if v.Rate < 18 || v.Rate > 22 {
		t.Errorf("measured rate %.2f/s, want about 20", v.Rate)
	}
	if v.Leave < 1.5 || v.Leave > 4.5 {
		t.Errorf("measured leaving %.2f/s, want about 3", v.Leave)
	}
	if v.RateVar <= 0 {
		t.Errorf("rate variance %v, want measured", v.RateVar)
	}
	var inside, total int
	var worst float64
	for round := range 8 {
		id, e := m.enter()
		v, _ := m.q.View("r")
		f := v.Forecast(e.Position)
		start := m.c.t
		for m.admitAt[id].IsZero() {
			m.run(time.Second, 15, 3, id)
			if m.c.t.Sub(start) > 10*time.Minute {
				t.Fatalf("round %d: %s never admitted", round, id)
			}
		}
		actual := m.admitAt[id].Sub(start) + 750*time.Millisecond
		total++
		if actual >= f.Low && actual <= f.High {
			inside++
		}
		rel := math.Abs((actual - f.ETA).Seconds()) / actual.Seconds()
		worst = max(worst, rel)
		t.Logf("round %d: position %d, forecast %v [%v, %v], admitted after %v", round, e.Position, f.ETA, f.Low, f.High, actual)
	}
	if inside < total*7/8 {
		t.Errorf("%d of %d admitted inside their range, want at least %d", inside, total, total*7/8)
	}
	if worst > 0.25 {
		t.Errorf("worst relative error %.2f, want at most 0.25", worst)
	}
}

// TestRateChangeFollowed: when the rate in force halves (a PUT, or the
// adaptive controller), the forecast takes the new rate at once instead of
// following the measured rate over its time constant, and the measured
// rate then stays there.
func TestRateChangeFollowed(t *testing.T) {
	m := newSim(t, 20, 500*time.Millisecond, 20000)
	m.run(time.Minute, 0, 0, "")
	v, _ := m.q.View("r")
	s := v.Settings
	s.AdmitRate = 10
	m.put(s)
	for _, after := range []time.Duration{0, 10 * time.Second, time.Minute} {
		m.run(after, 0, 0, "")
		v, _ := m.q.View("r")
		// 600 places at 10/s, and the poll's mean lateness.
		if got, want := v.Forecast(600).ETA, 60750*time.Millisecond; math.Abs(float64(got-want)) > 0.05*float64(want) {
			t.Errorf("%v after the rate halved: forecast for position 600 = %v, want %v ± 5 %%", after, got, want)
		}
	}
}

// TestForecastAfterIdleChange: a room configured while nobody waited (its
// default rate replaced by the sale's) forecasts its first wave at the
// configured rate, and a paused room that opens at its rate, not at what
// the measured rate had drifted to.
func TestForecastAfterIdleChange(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
	q := queue.New(memqueue.New(), queue.Options{Now: c.now})
	s := queue.DefaultSettings() // 50/s
	s.MaxActive = 100_000
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(time.Minute)
	if err := refresh(ctx, q); err != nil {
		t.Fatal(err)
	}
	s.AdmitRate, s.State = 10, queue.Paused
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, _, err := q.Enter(ctx, "r", fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// A minute paused with a line: nobody is admitted.
	for range 60 {
		c.t = c.t.Add(time.Second)
		if err := refresh(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	s.State = queue.Open
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	v, _ := q.View("r")
	if got, want := v.Forecast(100).ETA, 10750*time.Millisecond; got != want {
		t.Errorf("forecast for position 100 as the room opens = %v, want %v (100 at 10/s and the poll)", got, want)
	}
}

// TestLeaveNotMeasuredInADrawRoom: the opening draw gives sequence
// numbers to visitors already counted as waiting; that is not leaving.
func TestLeaveNotMeasuredInADrawRoom(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
	q := queue.New(memqueue.New(), queue.Options{Now: c.now})
	s := queue.DefaultSettings()
	s.OpensAt = c.t.Add(10 * time.Second)
	s.PresenceTimeout = 0 // these visitors never poll: with presence they are ghosts, parked
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		if _, _, err := q.Enter(ctx, "r", fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for range 300 {
		c.t = c.t.Add(100 * time.Millisecond)
		if _, err := q.Admit(ctx, "r"); err != nil {
			t.Fatal(err)
		}
		if err := refresh(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := q.View("r"); v.Leave != 0 {
		t.Errorf("leaving measured in a room that drew: %v/s, want 0", v.Leave)
	}
}

func TestAdmittedObservesOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := &clock{t: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
	q := queue.New(memqueue.New(), queue.Options{Now: c.now, Metrics: queue.NewMetrics(reg)})
	issued := c.t
	c.t = c.t.Add(20 * time.Second)
	f := queue.Forecast{ETA: 16 * time.Second, Low: 12 * time.Second, High: 19 * time.Second}
	q.Admitted("r", "a", 1, issued, f)                     // late: 20 s > 19 s; error (20−16)/20
	q.Admitted("r", "a", 1, issued, f)                     // the same place again: not counted
	q.Admitted("r", "b", 2, issued, queue.Forecast{})      // an old ticket: no forecast
	q.Admitted("r", "c", 3, issued.Add(5*time.Second), f)  // 15 s: inside
	q.Admitted("r", "d", 4, issued.Add(10*time.Second), f) // 10 s: early
	q.Admitted("r", "e", 5, issued.Add(30*time.Second), f) // issued after now: nothing
	wantRange := map[string]float64{"early": 1, "inside": 1, "late": 1}
	if got := rangeCounts(t, reg); !maps.Equal(got, wantRange) {
		t.Errorf("usher_eta_range_total = %v, want %v", got, wantRange)
	}
	// (20−16)/20 + (15−16)/15 + (10−16)/10
	if n, sum := errorRatio(t, reg); n != 3 || math.Abs(sum-(0.2-1.0/15-0.6)) > 1e-9 {
		t.Errorf("usher_eta_error_ratio: %d samples summing to %v, want 3 summing to %v", n, sum, 0.2-1.0/15-0.6)
	}

	// A place is remembered for two minutes: observed again after that.
	c.t = c.t.Add(3 * time.Minute)
	q.Admitted("r", "z", 9, c.t.Add(-time.Second), f) // 1 s: early
	q.Admitted("r", "a", 1, issued, f)                // 3 min 20 s: late
	wantRange = map[string]float64{"early": 2, "inside": 1, "late": 2}
	if got := rangeCounts(t, reg); !maps.Equal(got, wantRange) {
		t.Errorf("after the places were forgotten: usher_eta_range_total = %v, want %v", got, wantRange)
	}
}

// rangeCounts reads usher_eta_range_total by result.
func rangeCounts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "usher_eta_range_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					got[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return got
}

// errorRatio reads the one series of usher_eta_error_ratio.
func errorRatio(t *testing.T, reg *prometheus.Registry) (count uint64, sum float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if ms := mf.GetMetric(); mf.GetName() == "usher_eta_error_ratio" {
			if len(ms) != 1 {
				t.Fatalf("%d usher_eta_error_ratio series, want 1", len(ms))
			}
			return ms[0].GetHistogram().GetSampleCount(), ms[0].GetHistogram().GetSampleSum()
		}
	}
	t.Fatal("no usher_eta_error_ratio")
	return 0, 0
}

// TestForecastAtOpening: a room whose pre-queue waited for its opening
// draw forecasts the drawn line at its rate once the draw is done, not at
// what its measured rate decayed to while nobody could be admitted.
func TestForecastAtOpening(t *testing.T) {
	for _, admission := range []queue.Admission{queue.Static, queue.Adaptive} {
		t.Run(string(admission), func(t *testing.T) { testForecastAtOpening(t, admission) })
	}
}

func testForecastAtOpening(t *testing.T, admission queue.Admission) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
	q := queue.New(memqueue.New(), queue.Options{Now: c.now})
	s := queue.DefaultSettings()
	s.AdmitRate, s.MaxActive, s.PresenceTimeout, s.Admission = 10, 100_000, 0, admission
	s.OpensAt = c.t.Add(time.Minute)
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, _, err := q.Enter(ctx, "r", fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for range 61 { // the minute before the opening, and the opening
		c.t = c.t.Add(time.Second)
		if err := refresh(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Admit(ctx, "r"); err != nil { // draws, then admits a step
		t.Fatal(err)
	}
	if err := refresh(ctx, q); err != nil {
		t.Fatal(err)
	}
	v, _ := q.View("r")
	if !v.Draw.Done {
		t.Fatal("no draw after the opening")
	}
	if got, want := v.Forecast(100).ETA, 10750*time.Millisecond; math.Abs(float64(got-want)) > 0.05*float64(want) {
		t.Errorf("forecast for position 100 just after the draw = %v, want %v ± 5 %% (100 at 10/s and the poll)", got, want)
	}
}
