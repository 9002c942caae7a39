package loadgen

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"usher/internal/hist"
	"usher/internal/loadlab/simorigin"
	"usher/internal/wire"
)

// Tick is one interval of the run's timeline.
type Tick struct {
	// T is the interval's end, in seconds since the start.
	T float64 `json:"t_s"`
	// Origin calls: successes and errors per second, latency percentiles of
	// the successes that ended in the interval (ms).
	OriginRate   float64 `json:"origin_rps"`
	OriginErrors float64 `json:"origin_errors_ps"`
	P50          float64 `json:"p50_ms"`
	P95          float64 `json:"p95_ms"`
	P99          float64 `json:"p99_ms"`
	// Queue calls per second and their p95 (ms).
	QueueRate float64 `json:"queue_rps"`
	QueueP95  float64 `json:"queue_p95_ms"`
	// Visitors waiting and admitted (calling the origin) at the tick, and
	// admissions per second over the interval, as the generator saw them.
	Waiting      int64   `json:"waiting"`
	Active       int64   `json:"active"`
	AdmittedRate float64 `json:"admitted_ps"`
	// Utilization of the origin's connection pool over the interval.
	Utilization *float64 `json:"utilization,omitempty"`
	// Phase is the origin's phase at the tick (usher origin --phases).
	Phase int `json:"phase,omitempty"`
	// AdmitRate is the room's admission rate in force at the tick
	// (admit_rate_current), when the generator may read the room.
	AdmitRate *float64 `json:"admit_rate,omitempty"`
}

// timeline samples the run every Tick and draws the progress line.
type timeline struct {
	r     *runner
	ticks []Tick

	lastAt                time.Time
	lastOrigin, lastQueue *hist.Snapshot
	lastOK, lastErr       int64
	lastQueueN, lastAdm   int64
	lastStats             *simorigin.Stats
	phases                []*phaseAcc
}

func newTimeline(r *runner, stats *simorigin.Stats) *timeline {
	return &timeline{r: r, lastAt: r.start, lastOrigin: hist.New(), lastQueue: hist.New(), lastStats: stats}
}

// run samples until done is closed, then takes a last sample.
func (tl *timeline) run(done <-chan struct{}) {
	t := time.NewTicker(tl.r.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-done:
			tl.sample(true)
			return
		case <-t.C:
			tl.sample(false)
		}
	}
}

func (tl *timeline) sample(last bool) {
	r := tl.r
	now := time.Now()
	dt := now.Sub(tl.lastAt).Seconds()
	if dt <= 0 {
		return
	}
	o, q := r.origin.lat.Snapshot(), r.queue.lat.Snapshot()
	od, qd := o.Sub(tl.lastOrigin), q.Sub(tl.lastQueue)
	ok := r.origin.successes.Load()
	_, errs := r.origin.errs.snapshot()
	qn := r.queue.requests.Load()
	adm := r.admitted.Load()
	tick := Tick{
		T:            now.Sub(r.start).Seconds(),
		OriginRate:   float64(ok-tl.lastOK) / dt,
		OriginErrors: float64(errs-tl.lastErr) / dt,
		P50:          ms(od.Quantile(0.5)), P95: ms(od.Quantile(0.95)), P99: ms(od.Quantile(0.99)),
		QueueRate:    float64(qn-tl.lastQueueN) / dt,
		QueueP95:     ms(qd.Quantile(0.95)),
		Waiting:      r.waiting.Load(),
		Active:       r.active.Load(),
		AdmittedRate: float64(adm-tl.lastAdm) / dt,
	}
	if r.cfg.OriginStats != "" && tl.lastStats != nil {
		if st, err := r.originStats(); err == nil {
			u := simorigin.Utilization(*tl.lastStats, st)
			tick.Utilization = &u
			tick.Phase = st.Phase
			tl.addPhase(*tl.lastStats, st, dt, od, ok-tl.lastOK, adm-tl.lastAdm)
			tl.lastStats = &st
		}
	}
	if r.cfg.Scenario == Queued && r.cfg.AdminKey != "" {
		if rate, err := r.admitRate(); err == nil {
			tick.AdmitRate = &rate
		}
	}
	tl.ticks = append(tl.ticks, tick)
	tl.lastAt, tl.lastOrigin, tl.lastQueue = now, o, q
	tl.lastOK, tl.lastErr, tl.lastQueueN, tl.lastAdm = ok, errs, qn, adm
	tl.progress(tick, last)
}

// progress draws one line: in place on a terminal, else a line per 5 s.
func (tl *timeline) progress(t Tick, last bool) {
	w := tl.r.cfg.Progress
	if w == nil {
		return
	}
	length := tl.r.cfg.length().Seconds()
	if !tl.r.cfg.TTY && !last && len(tl.ticks)%max(1, int(5*time.Second/tl.r.cfg.Tick)) != 0 {
		return
	}
	const width = 20
	// The last sample may come after the grace period; the line shows the
	// run's time, so that it never reads 35s/30s.
	shown := min(t.T, length)
	done := min(width, int(shown/length*width))
	var b strings.Builder
	if tl.r.cfg.TTY {
		b.WriteString("\r\033[K")
	}
	fmt.Fprintf(&b, "%s [%s%s] %3.0fs/%.0fs  origin %s/s p95 %s ms err %s/s",
		tl.r.cfg.Scenario, strings.Repeat("=", done), strings.Repeat(" ", width-done), shown, length,
		num(t.OriginRate), num(t.P95), num(t.OriginErrors))
	if tl.r.cfg.Scenario == Queued {
		fmt.Fprintf(&b, " | waiting %d active %d admitted %s/s", t.Waiting, t.Active, num(t.AdmittedRate))
	}
	if t.Utilization != nil {
		fmt.Fprintf(&b, " | util %.0f%%", 100**t.Utilization)
	}
	if !tl.r.cfg.TTY || last {
		b.WriteString("\n")
	}
	io.WriteString(w, b.String())
}

// originStats reads the origin's GET /stats.
func (r *runner) originStats() (simorigin.Stats, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.cfg.OriginStats, nil)
	if err != nil {
		return simorigin.Stats{}, err
	}
	res, err := r.cfg.Client.Do(req)
	if err != nil {
		return simorigin.Stats{}, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return simorigin.Stats{}, fmt.Errorf("GET %s: %s", r.cfg.OriginStats, res.Status)
	}
	var st simorigin.Stats
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil || st.Conns == 0 {
		return simorigin.Stats{}, fmt.Errorf("GET %s: not an usher origin's stats", r.cfg.OriginStats)
	}
	return st, nil
}

// admitRate reads the room's admission rate in force.
func (r *runner) admitRate() (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cmp.Or(r.cfg.Admin, r.cfg.Usher)+"/api/v1/rooms/"+r.cfg.Room, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+r.cfg.AdminKey)
	res, err := r.cfg.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var room wire.Room
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET room: %s", res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(&room); err != nil {
		return 0, err
	}
	return room.Stats.AdmitRateCurrent, nil
}

func progressOr(c Config) io.Writer {
	if c.Progress != nil {
		return c.Progress
	}
	return io.Discard
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
