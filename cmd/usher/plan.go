package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"usher/internal/capacity"
)

// plan derives a room configuration from the site's pool and service time
// with Little's law (seed 002), optionally measuring the service time first.
func plan(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	def := capacity.DefaultInput()
	f := newFlags("plan", getenv, stderr)
	f.own("plan")
	pool := f.int("pool", 0, "concurrency limit of the site: requests served at once (its database connection pool)")
	service := f.duration("service-time", 0, "time one request takes without queueing, e.g. the p95 of --measure (seed 002: 76ms)")
	margin := floatFlag(f, "margin", def.Margin, "safety margin applied to the throughput and to the burst")
	ttl := f.duration("ttl", def.TTL, "active TTL: how long an admitted visitor stays active")
	batch := f.int("batch", 0, "preferred batch: visitors admitted at once (or give --interval; default: from --burst-target)")
	interval := f.duration("interval", 0, "preferred time between admission steps (instead of --batch)")
	burst := f.duration("burst-target", def.BurstTarget, "without --batch or --interval: longest a batch's burst may take to be served")
	perVisitor := floatFlag(f, "requests-per-visitor", def.RequestsPerVisitor, "requests an admitted visitor makes to the pool-bound endpoint")
	round := f.bool("round", def.Round, "round the throughput down to a round number, as seed 002 turns 92 into 90")
	roundInterval := f.bool("round-interval", false, "keep seed 002's rounded-up interval (389ms → 500ms) in the room, lowering admit_rate to batch ÷ interval")
	asJSON := f.bool("json", false, "print the plan (and measurement) as JSON")
	room := f.string("room", "sale", "room id for the example command")
	usherURL := f.string("usher", "http://127.0.0.1:8090", "usher's admin listener (--admin-addr) for the example command, which puts the room's settings")
	measure := f.string("measure", "", "measure the service time first: URL of the pool-bound endpoint (seed 002's first test)")
	mConc := f.int("measure-concurrency", 0, "requests in flight while measuring; below the pool (default pool ÷ 2)")
	mReqs := f.int("measure-requests", 200, "requests measured")
	mWarm := f.int("measure-warmup", 10, "requests sent first and not measured")
	mMethod := f.string("measure-method", http.MethodGet, "HTTP method of the measured requests")
	mBody := f.string("measure-body", "", "body of the measured requests (sent as application/json)")
	units := capacity.DefaultUnits()
	visitors := f.int("visitors", 0, "add a scale section for a sale of this many visitors: store memory, polls/s, enters/s, Redis primaries and usher instances at the peak (docs/scaling.md)")
	arriveOver := f.duration("arrive-over", time.Minute, "with --visitors: the visitors arrive evenly over this long from the opening (an opening's burst: most of the crowd comes in its first minute)")
	waitingBytes := floatFlag(f, "waiting-bytes", units.WaitingBytes, "with --visitors: Redis memory per waiting visitor, bytes (measured: docs/benchmarks.md#memory-per-waiting-visitor-on-redis)")
	activeBytes := floatFlag(f, "active-bytes", units.ActiveBytes, "with --visitors: Redis memory per active visitor, bytes (measured: docs/scaling.md)")
	primaryOps := floatFlag(f, "primary-ops", units.PrimaryOps, "with --visitors: store calls/s one Redis primary runs (measured: enters at concurrency 50, docs/benchmarks.md#enters-on-redis-against-redis-benchmark)")
	instancePolls := floatFlag(f, "instance-polls", units.InstancePolls, "with --visitors: status polls/s one usher instance answers (measured: docs/benchmarks.md)")
	instanceEnters := floatFlag(f, "instance-enters", units.InstanceEnters, "with --visitors: enters/s one usher instance takes (measured: docs/benchmarks.md)")
	pollBytes := floatFlag(f, "poll-answer-bytes", units.PollAnswerBytes, "with --visitors: bytes of one status poll's answer, headers and body (measured: docs/scaling.md)")
	if err := f.parse(args); err != nil {
		return err
	}

	in := def
	in.Pool, in.ServiceTime, in.Margin, in.TTL = *pool, *service, *margin, *ttl
	in.Batch, in.Interval, in.BurstTarget = *batch, *interval, *burst
	in.RequestsPerVisitor, in.Round, in.RoundInterval = *perVisitor, *round, *roundInterval
	if in.Pool < 1 {
		return fmt.Errorf("bad setting: --pool/%s: want the site's concurrency limit (at least 1)", f.envName("pool"))
	}
	switch {
	case *measure != "" && *service != 0:
		return fmt.Errorf("bad setting: --service-time/%s and --measure/%s: give one, not both", f.envName("service-time"), f.envName("measure"))
	case *measure == "" && *service <= 0:
		return fmt.Errorf("bad setting: --service-time/%s=%v: want the time one request takes without queueing, such as 76ms, or --measure URL to measure it",
			f.envName("service-time"), *service)
	}

	var m *capacity.Measurement
	if *measure != "" {
		conc := *mConc
		if conc == 0 {
			conc = max(1, in.Pool/2)
		}
		if conc >= in.Pool && in.Pool > 1 {
			fmt.Fprintf(stderr, "usher plan: warning: measuring at concurrency %d, not below the pool %d: requests may queue\n", conc, in.Pool)
		}
		probe := capacity.Probe{URL: *measure, Method: *mMethod, Concurrency: conc, Requests: *mReqs, Warmup: *mWarm}
		if *mBody != "" {
			probe.Body = []byte(*mBody)
			probe.Header = http.Header{"Content-Type": {"application/json"}}
		}
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc, DisableCompression: true}}
		defer client.CloseIdleConnections()
		got, err := capacity.Measure(ctx, client, probe)
		if err != nil {
			return err
		}
		m = &got
		in.ServiceTime = time.Duration(got.Latency.P95 * float64(time.Millisecond))
	}

	p, err := capacity.Make(in)
	if err != nil {
		return err
	}
	var sc *capacity.Scale
	if *visitors != 0 {
		units = capacity.Units{WaitingBytes: *waitingBytes, ActiveBytes: *activeBytes, PrimaryOps: *primaryOps,
			InstancePolls: *instancePolls, InstanceEnters: *instanceEnters, PollAnswerBytes: *pollBytes}
		got, err := capacity.MakeScale(p, capacity.ScaleInput{Visitors: int64(*visitors), ArriveOver: *arriveOver, Units: units})
		if err != nil {
			return fmt.Errorf("bad setting: --visitors/--arrive-over or a per-unit figure: %w", err)
		}
		sc = &got
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Measurement *capacity.Measurement `json:"measurement,omitempty"`
			Plan        capacity.Plan         `json:"plan"`
			Scale       *capacity.Scale       `json:"scale,omitempty"`
		}{m, p, sc})
	}
	if m != nil {
		if err := m.WriteText(stdout); err != nil {
			return err
		}
	}
	if err := p.WriteText(stdout, *usherURL, *room); err != nil {
		return err
	}
	if sc != nil {
		return sc.WriteText(stdout)
	}
	return nil
}

// floatFlag is a float64 flag with the environment fallback of newFlags.
func floatFlag(f *flags, name string, def float64, usage string) *float64 {
	if v := f.lookup(name); v != "" {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			f.errs = append(f.errs, fmt.Sprintf("%s=%q: want a number", f.envName(name), v))
		}
		def = x
	}
	return f.Float64(name, def, f.use(name, usage))
}
