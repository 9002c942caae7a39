package loadgen

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"usher/internal/hist"
	"usher/internal/loadlab/simorigin"
)

// Report is one scenario's results.
type Report struct {
	Scenario string `json:"scenario"`
	// Model is "closed" (Users users) or "open" (Stages).
	Model      string `json:"model"`
	Users      int    `json:"users,omitempty"`
	Stages     string `json:"stages,omitempty"`
	Iterations int    `json:"iterations,omitempty"`
	Calls      int    `json:"calls,omitempty"`
	Think      string `json:"think"`
	Target     string `json:"target"`
	Usher      string `json:"usher,omitempty"`
	Room       string `json:"room,omitempty"`
	// Buy is the schedule admitted visitors buy a seat of (Config.Buy),
	// BuyMode how they chose it.
	Buy       int64     `json:"buy,omitempty"`
	BuyMode   string    `json:"buy_mode,omitempty"`
	StartedAt time.Time `json:"started_at"`
	// ElapsedSeconds runs from the start until the last call ended.
	ElapsedSeconds float64 `json:"elapsed_s"`

	// Origin are the calls to the target; Queue the calls to usher.
	Origin OriginCalls `json:"origin"`
	Queue  *Calls      `json:"queue,omitempty"`
	// Visits, TimeInQueue (entry to admission, ms), ETA and Inversions
	// describe the waiting room (Queued only).
	Visits      *Visits       `json:"visits,omitempty"`
	TimeInQueue *hist.Summary `json:"time_in_queue,omitempty"`
	// ToConfirmed is the time from admission to a confirmed reservation,
	// HoldLatency a hold's answer (ms; Config.Buy).
	ToConfirmed *hist.Summary `json:"to_confirmed,omitempty"`
	HoldLatency *hist.Summary `json:"hold_latency,omitempty"`
	// PollLatency is that of the status polls answered, from when each
	// was due (Queue's latency mixes in the enters and leaves).
	PollLatency *hist.Summary `json:"poll_latency,omitempty"`
	ETA         *ETAError     `json:"eta_error,omitempty"`
	Inversions  *int64        `json:"admission_order_inversions,omitempty"`

	// Dropped counts open-model iterations not started for lack of a free
	// slot (MaxInFlight); Interrupted, calls cancelled at the end.
	Dropped     int64 `json:"dropped_iterations"`
	Interrupted int64 `json:"interrupted_calls"`

	Timeline []Tick `json:"timeline"`
	// Phases are the origin's phases, when it has some.
	Phases []PhaseReport `json:"phases,omitempty"`
}

// Calls counts one kind of call. Requests = Successes + the sum of Errors.
type Calls struct {
	Requests  int64            `json:"requests"`
	Successes int64            `json:"successes"`
	Errors    map[string]int64 `json:"errors"`
	// Throughput is successes per second over the run.
	Throughput float64 `json:"throughput"`
	// Latency is that of successful calls, from when each was due.
	Latency hist.Summary `json:"latency"`
}

// OriginCalls are Calls with the origin's own view, when it exposes one.
type OriginCalls struct {
	Calls
	// Utilization is the share of the origin's connection pool held during
	// the run, from its GET /stats; Stats is its last reading.
	Utilization *float64         `json:"utilization,omitempty"`
	Stats       *simorigin.Stats `json:"stats,omitempty"`
}

// Visits counts visitor journeys: Started = Admitted + Abandoned + GaveUp +
// the sum of Failed; Admitted = Completed + CutOff.
type Visits struct {
	Started int64 `json:"started"`
	// Admitted visitors; Passthrough of them were admitted at entry.
	Admitted    int64 `json:"admitted"`
	Passthrough int64 `json:"passthrough"`
	// CalledOrigin admitted visitors made at least one origin call.
	CalledOrigin int64 `json:"called_origin"`
	// Completed made all their calls; CutOff were admitted but the run
	// ended before they made them all.
	Completed int64 `json:"completed"`
	CutOff    int64 `json:"cut_off"`
	// Abandoned were still waiting when the run ended.
	Abandoned int64 `json:"abandoned"`
	// GaveUp stopped polling while waiting (Config.GiveUp).
	GaveUp int64 `json:"gave_up"`
	// Failed ended early: entry refused, poll refused, slot expired, room closed.
	Failed map[string]int64 `json:"failed"`
	// Bought admitted visitors reserved a seat, confirmed; FoundNothing
	// found no seat to hold (Config.Buy): admitted for nothing.
	Bought       int64 `json:"bought,omitempty"`
	FoundNothing int64 `json:"found_nothing,omitempty"`
	// HoldsTried and HoldsFailed (taken first: 409) are the buyers' holds,
	// Rejected the reservations the database rejected, Oversold the seats
	// two confirmed reservations bought (goal 0), BytesPerBuyer the
	// answers' bodies per admitted buyer.
	HoldsTried    int64   `json:"holds_tried,omitempty"`
	HoldsFailed   int64   `json:"holds_failed,omitempty"`
	Rejected      int64   `json:"rejected,omitempty"`
	Oversold      int64   `json:"oversold,omitempty"`
	BytesPerBuyer float64 `json:"bytes_per_buyer,omitempty"`
	// Polls are the status polls the visitors sent, PollsPerAdmitted
	// them ÷ Admitted (0 with none admitted): what an admission costs in
	// polls.
	Polls            int64   `json:"polls"`
	PollsPerAdmitted float64 `json:"polls_per_admitted"`
	// Rises are the answers that put a waiting visitor further back than
	// the one before (goal 0), in RoseVisitors visitors.
	Rises        int64 `json:"position_rises"`
	RoseVisitors int64 `json:"rose_visitors"`
}

// ErrorRate is the share of the run's counted calls (origin and queue)
// that failed: 1 when no call was counted, as nothing was shown to work.
func (rep *Report) ErrorRate() float64 {
	req, ok := rep.Origin.Requests, rep.Origin.Successes
	if rep.Queue != nil {
		req, ok = req+rep.Queue.Requests, ok+rep.Queue.Successes
	}
	if req == 0 {
		return 1
	}
	return float64(req-ok) / float64(req)
}

func (cs *callStats) calls(elapsed time.Duration) Calls {
	errs, _ := cs.errs.snapshot()
	ok := cs.successes.Load()
	return Calls{
		Requests: cs.requests.Load(), Successes: ok, Errors: errs,
		Throughput: float64(ok) / elapsed.Seconds(),
		Latency:    cs.lat.Snapshot().Summary(),
	}
}

func (r *runner) report(elapsed time.Duration, tl *timeline) *Report {
	c := r.cfg
	rep := &Report{
		Scenario: c.Scenario, Model: "closed", Users: c.Users, Iterations: c.Iterations,
		Think: c.Think.String(), Target: c.Target.Method + " " + c.Target.URL,
		StartedAt: r.start.UTC(), ElapsedSeconds: elapsed.Seconds(),
		Origin:      OriginCalls{Calls: r.origin.calls(elapsed)},
		Dropped:     r.dropped.Load(),
		Interrupted: r.interrupted.Load(),
		Timeline:    tl.ticks,
		Phases:      tl.phaseReports(),
	}
	if c.Open() {
		rep.Model = "open"
		parts := make([]string, len(c.Stages))
		for i, s := range c.Stages {
			parts[i] = s.Duration.String() + ":" + strconv.FormatFloat(s.Target, 'g', -1, 64)
		}
		rep.Stages = fmt.Sprintf("from %g/s: %s", c.StartRate, strings.Join(parts, ","))
	}
	if c.Scenario == Queued {
		rep.Usher, rep.Room, rep.Calls, rep.Buy = c.Usher, c.Room, c.Calls, c.Buy
		if c.Buy > 0 {
			rep.BuyMode = c.BuyMode
		}
		q := r.queue.calls(elapsed)
		rep.Queue = &q
		failed, _ := r.failed.snapshot()
		rep.Visits = &Visits{
			Started: r.started.Load(), Admitted: r.admitted.Load(), Passthrough: r.passthrough.Load(),
			CalledOrigin: r.calledOrigin.Load(), Completed: r.completed.Load(), CutOff: r.cutOff.Load(),
			Abandoned: r.abandoned.Load(), GaveUp: r.gaveUp.Load(), Failed: failed,
			Bought: r.bought.Load(), FoundNothing: r.foundNothing.Load(),
			Polls: r.polls.Load(), Rises: r.rises.Load(), RoseVisitors: r.roseVisitors.Load(),
		}
		if v := rep.Visits; v.Admitted > 0 {
			v.PollsPerAdmitted = float64(v.Polls) / float64(v.Admitted)
		}
		if c.Buy > 0 {
			v := rep.Visits
			v.HoldsTried, v.HoldsFailed, v.Rejected, v.Oversold = r.holdsTried.Load(), r.holdsFailed.Load(), r.rejected.Load(), r.sold.oversold()
			if v.Admitted > 0 {
				v.BytesPerBuyer = float64(r.buyBytes.Load()) / float64(v.Admitted)
			}
			s, h := r.toConfirmed.Snapshot().Summary(), r.holdLat.Snapshot().Summary()
			rep.ToConfirmed, rep.HoldLatency = &s, &h
		}
		s := r.inQueue.Snapshot().Summary()
		rep.TimeInQueue = &s
		p := r.pollLat.Snapshot().Summary()
		rep.PollLatency = &p
		r.mu.Lock()
		rep.ETA = etaError(r.visits)
		inv := inversions(r.visits)
		r.mu.Unlock()
		rep.Inversions = &inv
	}
	return rep
}

// WriteText writes the report for people.
func (rep *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Scenario %s: %s model, ", rep.Scenario, rep.Model)
	if rep.Model == "open" {
		fmt.Fprintf(&b, "arrivals %s", rep.Stages)
	} else {
		fmt.Fprintf(&b, "%s users", num(float64(rep.Users)))
		if rep.Iterations > 0 {
			fmt.Fprintf(&b, " × %d iterations", rep.Iterations)
		}
	}
	fmt.Fprintf(&b, ", %.1f s, think %s\n  target %s", rep.ElapsedSeconds, rep.Think, rep.Target)
	if rep.Queue != nil {
		calls := "until the run ends"
		if rep.Calls > 0 {
			calls = strconv.Itoa(rep.Calls)
		}
		if rep.Buy > 0 {
			calls = fmt.Sprintf("buy a seat of schedule %d", rep.Buy)
		}
		fmt.Fprintf(&b, " via usher %s room %s, calls per visit: %s", rep.Usher, rep.Room, calls)
	}
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "  %-12s %10s %10s %8s %11s %8s %8s %8s %8s %8s %8s\n",
		"", "requests", "successes", "errors", "throughput", "min", "avg", "p50", "p95", "p99", "max")
	row := func(name string, c Calls) {
		_, errs := sumErrors(c.Errors)
		l := c.Latency
		fmt.Fprintf(&b, "  %-12s %10s %10s %8s %9s/s %8s %8s %8s %8s %8s %8s  ms\n", name,
			num(float64(c.Requests)), num(float64(c.Successes)), num(float64(errs)), num(c.Throughput),
			num(l.Min), num(l.Avg), num(l.P50), num(l.P95), num(l.P99), num(l.Max))
	}
	row("origin", rep.Origin.Calls)
	if rep.Queue != nil {
		row("queue calls", *rep.Queue)
	}
	for _, line := range []struct {
		name string
		errs map[string]int64
	}{{"origin errors", rep.Origin.Errors}, {"queue errors", queueErrors(rep)}} {
		if len(line.errs) > 0 {
			fmt.Fprintf(&b, "  %s: %s\n", line.name, kinds(line.errs))
		}
	}
	if v := rep.Visits; v != nil {
		fmt.Fprintf(&b, "  visits: %s started, %s admitted (%s at entry), %s called the origin, %s completed, %s cut off, %s abandoned waiting",
			num(float64(v.Started)), num(float64(v.Admitted)), num(float64(v.Passthrough)), num(float64(v.CalledOrigin)),
			num(float64(v.Completed)), num(float64(v.CutOff)), num(float64(v.Abandoned)))
		if v.GaveUp > 0 {
			fmt.Fprintf(&b, ", %s gave up", num(float64(v.GaveUp)))
		}
		if v.Bought > 0 || v.FoundNothing > 0 || v.HoldsTried > 0 {
			fmt.Fprintf(&b, "; %s bought a seat (%s), %s admitted found nothing to buy; %s holds tried, %s taken first, %s per seat sold; %s rejected, %s oversold; %s bytes per buyer",
				num(float64(v.Bought)), rep.BuyMode, num(float64(v.FoundNothing)), num(float64(v.HoldsTried)), num(float64(v.HoldsFailed)),
				num(float64(v.HoldsTried)/max(1, float64(v.Bought))), num(float64(v.Rejected)), num(float64(v.Oversold)), num(v.BytesPerBuyer))
		}
		if len(v.Failed) > 0 {
			fmt.Fprintf(&b, ", failed: %s", kinds(v.Failed))
		}
		b.WriteString("\n")
		fmt.Fprintf(&b, "  polls: %s (%s per admitted visitor); position rises: %s in %s visitors\n",
			num(float64(v.Polls)), num(v.PollsPerAdmitted), num(float64(v.Rises)), num(float64(v.RoseVisitors)))
	}
	if q := rep.ToConfirmed; q != nil && q.Count > 0 {
		fmt.Fprintf(&b, "  admission to confirmed: p50 %s s, p95 %s s, max %s s\n", num(q.P50/1000), num(q.P95/1000), num(q.Max/1000))
	}
	if q := rep.HoldLatency; q != nil && q.Count > 0 {
		fmt.Fprintf(&b, "  holds: p50 %s ms, p95 %s ms, max %s ms\n", num(q.P50), num(q.P95), num(q.Max))
	}
	if q := rep.TimeInQueue; q != nil && q.Count > 0 {
		fmt.Fprintf(&b, "  time in queue: p50 %s s, p90 %s s, max %s s\n", num(q.P50/1000), num(q.P90/1000), num(q.Max/1000))
	}
	if p := rep.PollLatency; p != nil && p.Count > 0 {
		fmt.Fprintf(&b, "  status polls: p50 %s ms, p99 %s ms, max %s ms\n", num(p.P50), num(p.P99), num(p.Max))
	}
	if e := rep.ETA; e != nil {
		fmt.Fprintf(&b, "  ETA error (actual − predicted): mean %+.1f s, |error| p50 %s s, p90 %s s; mean predicted %s s, actual %s s (%s visitors)\n",
			e.MeanSeconds, num(e.P50AbsSeconds), num(e.P90AbsSeconds), num(e.MeanPredictedSeconds), num(e.MeanActualSeconds), num(float64(e.Count)))
		fmt.Fprintf(&b, "  ETA relative error |actual − predicted| ÷ actual: p50 %.1f %%, p90 %.1f %%", 100*e.P50Relative, 100*e.P90Relative)
		if e.Coverage != nil {
			fmt.Fprintf(&b, "; admitted inside the range: %.1f %% of %s (mean width %s s)", 100**e.Coverage, num(float64(e.Ranged)), num(e.MeanRangeSeconds))
		} else {
			b.WriteString("; no range (eta_range_seconds) from usher")
		}
		b.WriteString("\n")
	}
	if rep.Inversions != nil {
		fmt.Fprintf(&b, "  admission-order inversions: %d\n", *rep.Inversions)
	}
	if u := rep.Origin.Utilization; u != nil {
		st := rep.Origin.Stats
		fmt.Fprintf(&b, "  origin utilisation: %.0f %% of %d connections (peak %d busy); its unloaded p95 (%s) is %s ms\n",
			100**u, st.Conns, st.PeakBusyConns, st.ServiceDist, num(st.ServiceP95MS))
	}
	writePhases(&b, rep.Phases)
	if rep.Dropped > 0 || rep.Interrupted > 0 {
		fmt.Fprintf(&b, "  dropped iterations: %d, interrupted calls: %d\n", rep.Dropped, rep.Interrupted)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func queueErrors(rep *Report) map[string]int64 {
	if rep.Queue == nil {
		return nil
	}
	return rep.Queue.Errors
}

func sumErrors(m map[string]int64) (int, int64) {
	var total int64
	for _, v := range m {
		total += v
	}
	return len(m), total
}

func kinds(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %s", k, num(float64(m[k])))
	}
	return strings.Join(parts, ", ")
}

// num writes x with thousands separators, a decimal below 100, two below 1.
func num(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	digits := 0
	switch {
	case x == math.Trunc(x):
	case math.Abs(x) < 1:
		digits = 2
	case math.Abs(x) < 100:
		digits = 1
	}
	s := strconv.FormatFloat(x, 'f', digits, 64)
	intPart, frac, _ := strings.Cut(s, ".")
	neg := strings.HasPrefix(intPart, "-")
	intPart = strings.TrimPrefix(intPart, "-")
	var g strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			g.WriteByte(',')
		}
		g.WriteRune(c)
	}
	out := g.String()
	if frac != "" {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

// WriteComparison writes one line per scenario: the figures seed 000
// compares (origin throughput and latency), with utilisation and the wait.
func WriteComparison(w io.Writer, reports []*Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %10s %8s %11s %8s %8s %8s %8s %8s %6s %12s\n",
		"", "requests", "errors", "throughput", "min", "avg", "p95", "p99", "max", "util", "queue p50/90")
	for _, rep := range reports {
		o := rep.Origin
		_, errs := sumErrors(o.Errors)
		util := "-"
		if o.Utilization != nil {
			util = fmt.Sprintf("%.0f%%", 100**o.Utilization)
		}
		wait := "-"
		if q := rep.TimeInQueue; q != nil && q.Count > 0 {
			wait = num(q.P50/1000) + "/" + num(q.P90/1000) + " s"
		}
		fmt.Fprintf(&b, "%-8s %10s %8s %9s/s %8s %8s %8s %8s %8s %6s %12s  (latency ms)\n", rep.Scenario,
			num(float64(o.Requests)), num(float64(errs)), num(o.Throughput),
			num(o.Latency.Min), num(o.Latency.Avg), num(o.Latency.P95), num(o.Latency.P99), num(o.Latency.Max), util, wait)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
