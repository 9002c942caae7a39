package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"usher/internal/loadlab/loadgen"
	"usher/internal/testenv"
)

// runLoadtest runs `usher loadtest --json` with args and returns its reports.
func runLoadtest(t *testing.T, args ...string) []*loadgen.Report {
	t.Helper()
	var stdout, stderr strings.Builder
	args = append([]string{"--json", "--progress=false", "--pause", "0s"}, args...)
	if err := loadtest(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); err != nil {
		t.Fatalf("loadtest %v: %v\n%s", args, err, stderr.String())
	}
	var reports []*loadgen.Report
	if err := json.Unmarshal([]byte(stdout.String()), &reports); err != nil {
		t.Fatalf("loadtest --json: %v\n%s", err, stdout.String())
	}
	return reports
}

// checkInvariants asserts what holds for every report.
func checkInvariants(t *testing.T, rep *loadgen.Report) {
	t.Helper()
	calls := []loadgen.Calls{rep.Origin.Calls}
	if rep.Queue != nil {
		calls = append(calls, *rep.Queue)
	}
	for i, c := range calls {
		var errs int64
		for _, n := range c.Errors {
			errs += n
		}
		if c.Successes+errs != c.Requests {
			t.Errorf("%s call kind %d: successes %d + errors %d != requests %d", rep.Scenario, i, c.Successes, errs, c.Requests)
		}
		l := c.Latency
		if !(l.Min <= l.P50 && l.P50 <= l.P95 && l.P95 <= l.P99 && l.P99 <= l.Max) {
			t.Errorf("%s call kind %d: percentiles out of order: %+v", rep.Scenario, i, l)
		}
	}
	if len(rep.Timeline) == 0 {
		t.Errorf("%s: empty timeline", rep.Scenario)
	}
}

// TestLoadtestBothScenarios runs seed 000's two scenarios in small against
// an in-process origin and an in-process usher configured by usher plan.
func TestLoadtestBothScenarios(t *testing.T) {
	t.Parallel()
	dir := testenv.DataDir(t)
	usherURL := startServe(t, map[string]string{"USHER_DATA_DIR": dir}, "--addr", "127.0.0.1:0")
	key, err := os.ReadFile(filepath.Join(dir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	originURL := startOrigin(t, "--addr", "127.0.0.1:0", "--conns", "2", "--service", "constant:2ms")

	// 2 connections × 70 ms → 28.6/s, × 0.7 → 20 admissions/s, 2 at a time.
	var planned struct {
		Plan struct {
			Room json.RawMessage `json:"room"`
		} `json:"plan"`
	}
	if err := json.Unmarshal([]byte(runPlan(t, "--pool", "2", "--service-time", "70ms", "--batch", "2", "--json")), &planned); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "results", "run.json")
	reports := runLoadtest(t, "--scenario", "direct,queued", "--target", originURL+"/seats", "--usher", usherURL, "--usher-admin", adminOf(t, usherURL),
		"--room", "sale", "--setup-room", string(planned.Plan.Room), "--admin-key", strings.TrimSpace(string(key)),
		"--users", "20", "--spawn-rate", "200", "--iterations", "1", "--calls", "2", "--duration", "30s", "--tick", "200ms",
		"--out", out)
	if len(reports) != 2 {
		t.Fatalf("%d reports, want 2", len(reports))
	}
	direct, queued := reports[0], reports[1]
	for _, rep := range reports {
		checkInvariants(t, rep)
		if rep.Origin.Utilization == nil {
			t.Errorf("%s: no origin utilisation, want it read from /stats", rep.Scenario)
		}
	}
	if direct.Scenario != "direct" || direct.Origin.Requests != 20 || direct.Origin.Successes != 20 {
		t.Errorf("direct: %s, %d requests, %d successes; want 20 users × 1 call, all served", direct.Scenario, direct.Origin.Requests, direct.Origin.Successes)
	}
	v := queued.Visits
	if queued.Scenario != "queued" || v == nil {
		t.Fatalf("second report: %s, visits %v", queued.Scenario, v)
	}
	if v.Started != 20 || v.Admitted != 20 || v.CalledOrigin != v.Admitted || v.Completed != 20 || len(v.Failed) != 0 {
		t.Errorf("visits %+v: want 20 entered, admitted, and every admitted visitor calling the origin", v)
	}
	if queued.Origin.Requests != 40 || queued.Origin.Successes != 40 {
		t.Errorf("queued origin calls: %d requests, %d successes; want 20 visitors × 2", queued.Origin.Requests, queued.Origin.Successes)
	}
	if queued.Inversions == nil || *queued.Inversions != 0 {
		t.Errorf("admission-order inversions %v with a single room, want 0", queued.Inversions)
	}
	if queued.TimeInQueue.Count != 20 {
		t.Errorf("time in queue counted for %d visitors, want 20", queued.TimeInQueue.Count)
	}
	if queued.Queue.Requests < 20+20 {
		t.Errorf("%d queue calls, want at least an entry and a leave per visitor", queued.Queue.Requests)
	}
	// At 20 admissions/s some of the 20 visitors waited.
	if v.Passthrough == 20 {
		t.Error("every visitor was admitted at entry: the planned room did not queue anyone")
	}

	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var written []*loadgen.Report
	if err := json.Unmarshal(b, &written); err != nil || len(written) != 2 {
		t.Errorf("results file: %v, %d reports", err, len(written))
	}
	svg, err := os.ReadFile(filepath.Join(dir, "results", "run.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(svg, new(struct{ XMLName xml.Name })); err != nil {
		t.Errorf("chart is not well-formed SVG: %v", err)
	}
}

// TestLoadtestGatedOrigin puts the origin behind usher's gate: direct users
// are refused, queued users get through with their passes.
func TestLoadtestGatedOrigin(t *testing.T) {
	t.Parallel()
	dir := testenv.DataDir(t)
	usherURL := startServe(t, map[string]string{"USHER_DATA_DIR": dir}, "--addr", "127.0.0.1:0")
	key, err := os.ReadFile(filepath.Join(dir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	originURL := startOrigin(t, "--addr", "127.0.0.1:0", "--service", "constant:1ms", "--usher", usherURL, "--gate-room", "sale")
	common := []string{"--target", originURL + "/seats", "--usher", usherURL, "--usher-admin", adminOf(t, usherURL), "--room", "sale", "--admin-key", strings.TrimSpace(string(key)),
		"--setup-room", `{"max_active":100,"admit_rate":100,"interval_ms":50}`,
		"--users", "3", "--iterations", "1", "--calls", "2", "--duration", "20s",
		"--max-error-rate", "1"} // every direct call is refused
	reports := runLoadtest(t, append([]string{"--scenario", "direct,queued"}, common...)...)
	direct, queued := reports[0], reports[1]
	checkInvariants(t, direct)
	checkInvariants(t, queued)
	if direct.Origin.Successes != 0 || direct.Origin.Errors["http 401"]+direct.Origin.Errors["http 403"] != 3 {
		t.Errorf("direct calls to a gated origin: %d successes, errors %v; want all 3 refused", direct.Origin.Successes, direct.Origin.Errors)
	}
	if queued.Origin.Successes != 6 {
		t.Errorf("queued calls to a gated origin: %d successes, errors %v; want 3 visitors × 2 let through", queued.Origin.Successes, queued.Origin.Errors)
	}
}

func TestLoadtestBadSettings(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--scenario", "both"},
		{"--think", "x"},
		{"--stages", "30s"},
		{"--stages", "10s:5", "--users", "3"},
		{"--max-error-rate", "2"},
		{"--expect", "abc"},
		{"--setup-room", "{}"},
		{"--target", "not a url"},
	} {
		var stdout, stderr strings.Builder
		if err := loadtest(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); err == nil {
			t.Errorf("loadtest %v: err = nil, want an error", args)
		}
	}
}

// TestLoadtestBuy sells 10 seats to 60 visitors through a real usher, in
// each way buyers choose seats: admitted visitors buy through the booking
// API (the compact seat map, or best available); no seat is bought twice,
// only a visit whose reservation was confirmed counts as completed, and
// once the room's inventory is gone the rest are told sold out instead of
// being admitted for nothing.
func TestLoadtestBuy(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{loadgen.BuyRandom, loadgen.BuyBest, loadgen.BuyMixed} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			testLoadtestBuy(t, mode)
		})
	}
}

func testLoadtestBuy(t *testing.T, mode string) {
	dir := testenv.DataDir(t)
	var out, errs strings.Builder
	if err := seed(context.Background(), []string{"--seats", "10", "--data-dir", dir, "--json"}, func(string) string { return "" }, &out, &errs); err != nil {
		t.Fatalf("seed: %v\n%s", err, errs.String())
	}
	usherURL := startServe(t, map[string]string{"USHER_DATA_DIR": dir}, "--addr", "127.0.0.1:0", "--inventory-every", "100ms")
	key, err := os.ReadFile(filepath.Join(dir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	c := client{t, usherURL}
	waitFor(t, "the schedule's room counts its 10 seats", func() bool {
		status, _, room := c.admin().do("GET", "/api/v1/rooms/schedule-1", strings.TrimSpace(string(key)), "")
		stats, _ := room["stats"].(map[string]any)
		return status == 200 && stats["inventory"] == float64(10)
	})
	reports := runLoadtest(t, "--scenario", "queued", "--buy", "1", "--buy-mode", mode, "--usher", usherURL, "--usher-admin", adminOf(t, usherURL), "--room", "schedule-1",
		"--setup-room", `{"client_enters_per_minute":0,"admit_rate":20,"interval_ms":100,"visitors_per_unit":2}`,
		"--admin-key", strings.TrimSpace(string(key)), "--users", "60", "--spawn-rate", "100", "--iterations", "1",
		"--duration", "60s", "--tick", "200ms", "--max-error-rate", "1")
	rep := reports[0]
	checkInvariants(t, rep)
	v := rep.Visits
	t.Logf("visits: %+v", v)
	if v == nil || v.Started != 60 || rep.BuyMode != mode {
		t.Fatalf("visits %+v in mode %q, want 60 started in %s", v, rep.BuyMode, mode)
	}
	if v.Bought < 1 || v.Bought > 10 || v.Oversold != 0 || v.Rejected != 0 {
		t.Errorf("%d bought, %d oversold, %d rejected; want 1 to 10 bought (10 seats), none oversold or rejected", v.Bought, v.Oversold, v.Rejected)
	}
	if v.HoldsTried < v.Bought || v.HoldsFailed > v.HoldsTried || v.BytesPerBuyer <= 0 {
		t.Errorf("%d holds tried, %d taken first, %g bytes per buyer for %d bought", v.HoldsTried, v.HoldsFailed, v.BytesPerBuyer, v.Bought)
	}
	if rep.ToConfirmed == nil || rep.ToConfirmed.Count != uint64(v.Bought) {
		t.Errorf("admission to confirmed %+v, want one sample per buyer (%d)", rep.ToConfirmed, v.Bought)
	}
	if v.Completed != v.Bought {
		t.Errorf("%d completed, %d bought: a buy that bought nothing is not completed", v.Completed, v.Bought)
	}
	if v.Bought+v.FoundNothing > v.Admitted {
		t.Errorf("%d bought + %d found nothing > %d admitted", v.Bought, v.FoundNothing, v.Admitted)
	}
	var soldOut int64
	for kind, n := range v.Failed {
		if strings.Contains(kind, "sold_out") || strings.Contains(kind, "sold out") {
			soldOut += n
		}
	}
	if soldOut == 0 {
		t.Errorf("no visitor was told the room sold out (failed %v)", v.Failed)
	}
}
