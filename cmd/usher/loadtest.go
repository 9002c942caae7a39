package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"usher/internal/loadlab/loadgen"
)

// loadtest runs seed 000's scenarios (direct, queued) against an origin
// and usher, and reports them; --out also writes the JSON and an SVG chart.
func loadtest(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newFlags("loadtest", getenv, stderr)
	f.own("loadtest")
	scenarios := f.string("scenario", "direct", "scenarios to run in turn, comma-separated: direct (users call the target) and queued (through the room)")
	target := f.string("target", "http://127.0.0.1:8081/seats", "origin endpoint the users call")
	method := f.string("method", http.MethodGet, "HTTP method of origin calls")
	body := f.string("body", "", "body of origin calls (sent as application/json)")
	expect := f.string("expect", "404,409", "non-2xx statuses of origin calls that count as successes (seed 002: seat missing or taken)")
	usherURL := f.string("usher", "http://127.0.0.1:8080", "usher base URL (queued)")
	room := f.string("room", "sale", "room id (queued)")
	usherAdmin := f.string("usher-admin", "http://127.0.0.1:8090", "usher's admin listener (its --admin-addr), for --setup-room and admit_rate_current")
	setupRoom := f.string("setup-room", "", "room settings to PUT before the queued scenario, e.g. from usher plan --json | jq -c .plan.room")
	adminKey := f.string("admin-key", "", "admin API key, for --setup-room and to chart the room's admission rate in force (admit_rate_current)")
	users := f.int("users", 100, "closed model: concurrent users")
	spawn := floatFlag(f, "spawn-rate", 0, "closed model: users started per second (0: all at once)")
	iterations := f.int("iterations", 0, "closed model: iterations per user, an origin call (direct) or a visit (queued); 0 until --duration ends")
	duration := f.duration("duration", 30*time.Second, "closed model: how long each scenario runs")
	stages := f.string("stages", "", "open model instead of --users: arrival rate stages, e.g. 30s:100,1m:100,10s:0 (k6's ramping-arrival-rate)")
	startRate := floatFlag(f, "start-rate", 0, "open model: arrivals per second at the start")
	maxInFlight := f.int("max-in-flight", 10_000, "open model: iterations running at once at most; further arrivals are dropped")
	calls := f.int("calls", 5, "queued: origin calls per admitted visitor (0: until the run ends)")
	think := f.string("think", "0s", "pause before each origin call but a visitor's first: a duration or MIN-MAX")
	leave := f.bool("leave", true, "queued: visitors leave the room after their calls, freeing the slot")
	giveUp := floatFlag(f, "give-up", 0, "queued: share of waiting visitors (0 to 1) who give up silently (stop polling, never leave) at a random moment within the ETA they were told")
	buy := f.int("buy", 0, "queued: admitted visitors buy one seat of this schedule through usher's booking API (seat map, hold, reserve) instead of calling the target, which then defaults to the schedule's seat map; the report counts who bought and who found nothing to buy")
	buyMode := f.string("buy-mode", loadgen.BuyRandom, "queued, with --buy: how a buyer chooses a seat: random (any available seat), stage (one of the 100 front-most available), best (best available: the server picks), mixed (half stage, half best)")
	forwardedFor := f.bool("forwarded-for", false, "queued: each visit enters with an X-Forwarded-For address of its own (198.18.0.0/16), for a usher whose --trusted-proxies holds this machine")
	timeout := f.duration("timeout", 60*time.Second, "bound on each HTTP call")
	grace := f.duration("grace", 5*time.Second, "how long calls in flight at the end may finish")
	tick := f.duration("tick", time.Second, "timeline resolution")
	originStats := f.string("origin-stats", "auto", "origin's stats URL for utilisation: auto (the target's host /stats, if it answers), a URL, or none")
	pause := f.duration("pause", 3*time.Second, "pause between scenarios")
	asJSON := f.bool("json", false, "print the reports as JSON instead of text")
	out := f.string("out", "", "write the reports as JSON to this file, and the chart next to it (.svg)")
	progress := f.bool("progress", true, "draw a progress line on stderr")
	maxErrorRate := floatFlag(f, "max-error-rate", 0.01, "exit with an error when a scenario's failed calls (origin and queue) exceed this share of its calls")
	if err := f.parse(args); err != nil {
		return err
	}
	if *maxErrorRate < 0 || *maxErrorRate > 1 {
		f.errs = append(f.errs, fmt.Sprintf("--max-error-rate/%s=%g: want 0 to 1", f.envName("max-error-rate"), *maxErrorRate))
	}

	cfg := loadgen.Config{
		Target: loadgen.Target{URL: *target, Method: *method}, Usher: strings.TrimRight(*usherURL, "/"), Room: *room,
		Users: *users, SpawnRate: *spawn, Iterations: *iterations, Duration: *duration,
		StartRate: *startRate, MaxInFlight: *maxInFlight, Calls: *calls, Leave: *leave, ForwardedFor: *forwardedFor, GiveUp: *giveUp,
		Buy: int64(*buy), BuyMode: *buyMode,
		Timeout: *timeout, Grace: *grace, Tick: *tick,
	}
	if *body != "" {
		cfg.Target.Body = []byte(*body)
		cfg.Target.Header = http.Header{"Content-Type": {"application/json"}}
	}
	for _, s := range strings.Split(*expect, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		code, err := strconv.Atoi(s)
		if err != nil || code < 100 || code > 599 {
			f.errs = append(f.errs, fmt.Sprintf("--expect: %q is not an HTTP status", s))
		}
		cfg.Expect = append(cfg.Expect, code)
	}
	var err error
	if cfg.Think, err = loadgen.ParseThink(*think); err != nil {
		f.errs = append(f.errs, "--think: "+err.Error())
	}
	if *stages != "" && f.isSet("users") {
		f.errs = append(f.errs, "--stages (the open model) and --users (the closed model) exclude each other: give one")
	}
	if *stages != "" {
		if cfg.Stages, err = loadgen.ParseStages(*stages); err != nil {
			f.errs = append(f.errs, "--stages: "+err.Error())
		}
		cfg.Users = 0
	}
	if *buy > 0 && !f.isSet("target") {
		cfg.Target.URL = "" // the schedule's seat map (loadgen.Config.Buy)
		if !f.isSet("origin-stats") {
			*originStats = "none"
		}
	}
	switch *originStats {
	case "none", "":
	case "auto":
		if u, err := url.Parse(*target); err == nil {
			cfg.OriginStats = u.Scheme + "://" + u.Host + "/stats"
		}
	default:
		cfg.OriginStats = *originStats
	}
	names := strings.Split(*scenarios, ",")
	for _, name := range names {
		if name != loadgen.Direct && name != loadgen.Queued {
			f.errs = append(f.errs, fmt.Sprintf("--scenario %q: want direct, queued or both comma-separated", name))
		}
	}
	if *setupRoom != "" && *adminKey == "" {
		f.errs = append(f.errs, "--setup-room needs --admin-key")
	}
	if err := f.check(); err != nil {
		return err
	}
	conns := max(cfg.Users, 64)
	if cfg.Open() {
		conns = min(cfg.MaxInFlight, 4096)
	}
	cfg.Client = loadgen.NewClient(conns)
	defer cfg.Client.CloseIdleConnections()
	if *progress {
		cfg.Progress, cfg.TTY = stderr, isTerminal(stderr)
	}

	var reports []*loadgen.Report
	for i, name := range names {
		if i > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(*pause):
			}
		}
		if ctx.Err() != nil {
			break
		}
		c := cfg
		c.Scenario = name
		c.AdminKey, c.Admin = *adminKey, strings.TrimRight(*usherAdmin, "/")
		if name == loadgen.Queued && *setupRoom != "" {
			if err := loadgen.PutRoom(ctx, cfg.Client, c.Admin, c.Room, *adminKey, []byte(*setupRoom)); err != nil {
				return err
			}
		}
		rep, err := loadgen.Run(ctx, c)
		if err != nil {
			return err
		}
		reports = append(reports, rep)
		if !*asJSON {
			if err := rep.WriteText(stdout); err != nil {
				return err
			}
		}
	}
	if len(reports) > 1 && !*asJSON {
		if err := loadgen.WriteComparison(stdout, reports); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(reports); err != nil {
			return err
		}
	}
	if *out != "" {
		if err := writeResults(*out, reports); err != nil {
			return err
		}
		if !*asJSON {
			fmt.Fprintf(stdout, "wrote %s and %s\n", *out, chartPath(*out))
		}
	}
	// An interrupted run still reports what it measured; a run whose calls
	// failed says so in its exit status.
	var failed []string
	for _, rep := range reports {
		if rate := rep.ErrorRate(); rate > *maxErrorRate {
			failed = append(failed, fmt.Sprintf("%s: %.1f%% of calls failed", rep.Scenario, 100*rate))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s, above --max-error-rate %g%%", strings.Join(failed, "; "), 100**maxErrorRate)
	}
	return nil
}

// writeResults writes the reports as JSON to path and the chart next to it.
func writeResults(path string, reports []*loadgen.Report) error {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(reports, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return err
	}
	svg, err := os.Create(chartPath(path))
	if err != nil {
		return err
	}
	if err := loadgen.WriteSVG(svg, reports); err != nil {
		svg.Close()
		return err
	}
	return svg.Close()
}

// chartPath is path with its extension replaced by .svg.
func chartPath(path string) string {
	return strings.TrimSuffix(path, filepath.Ext(path)) + ".svg"
}

// isTerminal reports whether w is a terminal (to redraw the progress line).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
