// Package loadgen is usher's load generator: users call a site directly, or
// enter a waiting room, poll as told and call the site once admitted. It
// reports what k6 or Locust would, plus what only a waiting room has: time in
// queue, ETA error, admission-order inversions.
//
// Every latency is measured from the time the call was due, on the
// generator's clock (no coordinated omission), and only successful calls
// enter the latency histograms. Calls still in flight when the run and its
// grace period end are cancelled and counted apart (interrupted): requests
// equal successes plus errors.
//
// Limits: the generator shares the machine with what it measures, so its
// round trips avoid net/http's Transport (see conns); HTTP/1.1 only, no
// redirects, cookies or compression. Scenarios, models, the report and the
// generator's own rate: docs/loadlab.md#usher-loadtest.
package loadgen

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"usher/internal/hist"
	"usher/internal/loadlab/simorigin"
)

type runner struct {
	cfg   Config
	start time.Time
	// stop is closed when the run's time is over: no new calls start.
	stop    chan struct{}
	stopped atomic.Bool
	// hard is cancelled after the grace period: calls in flight end.
	hard  context.Context
	conns *conns

	origin, queue *callStats
	interrupted   atomic.Int64
	dropped       atomic.Int64

	// Queued scenario.
	entriesURL string
	meURL      string
	started    atomic.Int64
	admitted   atomic.Int64
	// passthrough visitors were admitted at entry; calledOrigin made at
	// least one origin call; completed made them all; cutOff were stopped by
	// the end of the run; abandoned were still waiting then.
	passthrough  atomic.Int64
	calledOrigin atomic.Int64
	completed    atomic.Int64
	cutOff       atomic.Int64
	abandoned    atomic.Int64
	gaveUp       atomic.Int64
	// bought reserved a seat; foundNothing found none to hold (Config.Buy).
	bought, foundNothing atomic.Int64
	// holdsTried and holdsFailed (409) count the holds the buyers tried,
	// rejected their reservations the database rejected, buyBytes the
	// bodies of their answers; toConfirmed is the time from admission to
	// a confirmed reservation, holdLat a hold's answer; sold the seats
	// bought (Config.Buy).
	holdsTried, holdsFailed, rejected, buyBytes atomic.Int64
	toConfirmed, holdLat                        *hist.Recorder
	sold                                        soldSeats
	// layouts are the seat-map layouts read (Config.Buy).
	layouts layouts
	// polls are the status polls sent; rises the answers that put a
	// visitor further back than the one before, in roseVisitors visitors.
	polls, rises, roseVisitors atomic.Int64
	failed                     counter
	// waiting and active are gauges: visitors waiting, admitted and calling.
	waiting atomic.Int64
	active  atomic.Int64
	inQueue *hist.Recorder
	// pollLat is the latency of the status polls answered, from when each
	// was due (part of queue's).
	pollLat *hist.Recorder
	mu      sync.Mutex
	visits  []visit
}

// Run runs one scenario until its time is over (or, with Iterations, until
// every user is done) and returns its report. ctx ends it early, as the end
// of its time would.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	hard, cancelHard := context.WithCancel(context.Background())
	defer cancelHard()
	r := &runner{
		cfg: cfg, stop: make(chan struct{}), hard: hard, conns: newConns(cfg.Timeout),
		origin: newCallStats(), queue: newCallStats(), inQueue: hist.NewRecorder(), pollLat: hist.NewRecorder(), toConfirmed: hist.NewRecorder(), holdLat: hist.NewRecorder(),
		entriesURL: cfg.Usher + "/api/v1/rooms/" + cfg.Room + "/entries",
	}
	r.meURL = r.entriesURL + "/me"

	var before *simorigin.Stats
	if cfg.OriginStats != "" {
		if st, err := r.originStats(); err == nil {
			before = &st
		} else {
			fmt.Fprintf(progressOr(cfg), "loadgen: origin stats unavailable (%v); utilisation not reported\n", err)
			r.cfg.OriginStats = ""
		}
	}

	r.start = time.Now()
	length := cfg.length()
	var users sync.WaitGroup
	// scheduled is closed when the open model's schedule has run out.
	scheduled := make(chan struct{})
	if cfg.Open() {
		users.Add(1)
		go func() { defer users.Done(); r.arrivals(&users); close(scheduled) }()
	} else {
		r.closed(&users)
	}
	allDone := make(chan struct{})
	go func() { users.Wait(); close(allDone) }()

	tl := newTimeline(r, before)
	tickDone := make(chan struct{})
	go func() { defer close(tickDone); tl.run(allDone) }()

	end := time.NewTimer(length)
	defer end.Stop()
	if cfg.Open() {
		end.Stop() // the schedule ends the run
	}
	select {
	case <-scheduled:
	case <-end.C:
	case <-ctx.Done():
	case <-allDone:
	}
	r.stopped.Store(true)
	close(r.stop)
	grace := time.NewTimer(cfg.Grace)
	defer grace.Stop()
	select {
	case <-allDone:
	case <-grace.C:
		cancelHard()
		r.conns.abort()
		<-allDone
	}
	r.conns.close()
	elapsed := time.Since(r.start)
	<-tickDone
	rep := r.report(elapsed, tl)
	if cfg.OriginStats != "" && before != nil {
		if after, err := r.originStats(); err == nil {
			u := simorigin.Utilization(*before, after)
			rep.Origin.Utilization = &u
			rep.Origin.Stats = &after
		}
	}
	return rep, nil
}

// closed starts the closed model's users.
func (r *runner) closed(users *sync.WaitGroup) {
	for i := range r.cfg.Users {
		var offset time.Duration
		if r.cfg.SpawnRate > 0 {
			offset = time.Duration(float64(i) / r.cfg.SpawnRate * float64(time.Second))
		}
		users.Add(1)
		go func() {
			defer users.Done()
			if !r.sleepUntil(r.start.Add(offset)) {
				return
			}
			due := time.Now()
			var backoff time.Duration
			for it := 0; r.cfg.Iterations == 0 || it < r.cfg.Iterations; it++ {
				if r.stopped.Load() {
					return
				}
				var ok bool
				due, ok = r.iteration(due, &backoff)
				if !ok || !r.sleepUntil(due) {
					return
				}
			}
		}()
	}
}

// Back-off of a closed-model user whose origin call failed without an
// answer (connection refused, reset, timed out): it doubles from minBackoff
// to maxBackoff, and an answer resets it. A target that is down thus sees
// each user about once a second, not in a tight loop.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = time.Second
)

// iteration runs one iteration due at due and returns when the next is due.
// backoff is the user's back-off (nil in the open model, whose arrivals do
// not wait on answers).
func (r *runner) iteration(due time.Time, backoff *time.Duration) (time.Time, bool) {
	if r.cfg.Scenario == Direct {
		res := r.originCall(due, "")
		next := res.recv.Add(r.cfg.Think.Sample())
		if backoff != nil {
			if res.counted && res.status == 0 {
				*backoff = min(max(2**backoff, minBackoff), maxBackoff)
				next = next.Add(*backoff)
			} else {
				*backoff = 0
			}
		}
		return next, true
	}
	if !r.visit(due) {
		return time.Now().Add(time.Second), true // back off before entering again
	}
	return time.Now(), true
}

// arrivals is the open model: iteration n starts at the time the ramping
// rate's integral reaches n, in its own goroutine, unless MaxInFlight are
// running (then it is dropped, as k6 drops it without a free VU).
func (r *runner) arrivals(users *sync.WaitGroup) {
	sched := newSchedule(r.cfg.StartRate, r.cfg.Stages)
	sem := make(chan struct{}, r.cfg.MaxInFlight)
	for n := 1; ; n++ {
		at, ok := sched.at(float64(n))
		if !ok {
			return
		}
		due := r.start.Add(at)
		if !r.sleepUntil(due) {
			return
		}
		select {
		case sem <- struct{}{}:
			users.Add(1)
			go func() {
				defer func() { <-sem; users.Done() }()
				r.iteration(due, nil)
			}()
		default:
			r.dropped.Add(1)
		}
	}
}

// sleepUntil waits until t; false when the run stopped first.
func (r *runner) sleepUntil(t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return !r.stopped.Load()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return !r.stopped.Load()
	case <-r.stop:
		return false
	}
}

// originCall calls the target, with the pass as Bearer token if given.
func (r *runner) originCall(due time.Time, pass string) result {
	t := r.cfg.Target
	req, err := http.NewRequest(t.Method, t.URL, bodyReader(t.Body))
	if err != nil {
		panic(err) // validated
	}
	for k, v := range t.Header {
		req.Header[k] = v
	}
	if pass != "" {
		req.Header.Set("Authorization", "Bearer "+pass)
	}
	return r.call(r.origin, req, due, nil, r.cfg.Expect)
}

// schedule is the open model's arrival curve: the rate goes linearly from
// the previous stage's target to each stage's target.
type schedule struct {
	start  float64
	stages []Stage
	i      int     // current stage
	base   float64 // arrivals before stage i
	t0     float64 // seconds before stage i
	r0     float64 // rate at the start of stage i
}

func newSchedule(start float64, stages []Stage) *schedule {
	return &schedule{start: start, stages: stages, r0: start}
}

// at returns the time of the n-th arrival (n increasing between calls).
func (s *schedule) at(n float64) (time.Duration, bool) {
	for s.i < len(s.stages) {
		st := s.stages[s.i]
		d := st.Duration.Seconds()
		a := (st.Target - s.r0) / (2 * d) // rate(t) = r0 + 2a·t
		inStage := s.r0*d + a*d*d
		if n-s.base <= inStage+1e-9 {
			c := n - s.base
			var t float64
			if disc := s.r0*s.r0 + 4*a*c; a == 0 {
				t = c / s.r0
			} else {
				t = 2 * c / (s.r0 + math.Sqrt(max(disc, 0)))
			}
			return time.Duration((s.t0 + min(t, d)) * float64(time.Second)), true
		}
		s.base += inStage
		s.t0 += d
		s.r0 = st.Target
		s.i++
	}
	return 0, false
}
