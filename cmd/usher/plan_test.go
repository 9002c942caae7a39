package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func runPlan(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr strings.Builder
	if err := plan(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); err != nil {
		t.Fatalf("plan %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

func TestPlanSeed002(t *testing.T) {
	t.Parallel()
	out := runPlan(t, "--pool", "10", "--service-time", "76ms", "--margin", "0.7", "--ttl", "3m", "--batch", "35")
	for _, want := range []string{"= 131.6 req/s", "rounded down to 90 req/s", "= 16,200 visitors", "389ms; the room uses 388ms",
		`{"state":"open","max_active":16200,"admit_rate":90,"interval_ms":388,"active_ttl_seconds":180,"claim_window_seconds":30}`} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
	var got struct {
		Plan struct {
			Room map[string]any `json:"room"`
		} `json:"plan"`
	}
	if err := json.Unmarshal([]byte(runPlan(t, "--pool", "10", "--service-time", "76ms", "--batch", "35", "--round-interval", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	if got.Plan.Room["interval_ms"] != 500.0 || got.Plan.Room["admit_rate"] != 70.0 {
		t.Errorf("--round-interval room %v, want seed 002's 35 per 500 ms (70/s)", got.Plan.Room)
	}
}

func TestPlanMeasure(t *testing.T) {
	t.Parallel()
	base := startOrigin(t, "--addr", "127.0.0.1:0", "--conns", "4", "--service", "constant:5ms")
	out := runPlan(t, "--pool", "4", "--measure", base+"/seats", "--measure-requests", "20", "--measure-warmup", "2", "--batch", "4")
	for _, want := range []string{"Service time: 20 requests", "at concurrency 2", "p95", "Little's law predicts", "(pool) ÷ "} {
		if !strings.Contains(out, want) {
			t.Errorf("plan --measure output lacks %q:\n%s", want, out)
		}
	}
	var got struct {
		Measurement struct {
			Latency struct {
				Count uint64  `json:"count"`
				P95   float64 `json:"p95_ms"`
			} `json:"latency"`
		} `json:"measurement"`
		Plan struct {
			Input struct {
				ServiceTimeMS float64 `json:"service_time_ms"`
			} `json:"input"`
		} `json:"plan"`
	}
	js := runPlan(t, "--pool", "4", "--measure", base+"/seats", "--measure-requests", "20", "--json")
	if err := json.Unmarshal([]byte(js), &got); err != nil {
		t.Fatal(err)
	}
	if got.Measurement.Latency.Count != 20 || got.Measurement.Latency.P95 < 5 || got.Plan.Input.ServiceTimeMS != got.Measurement.Latency.P95 {
		t.Errorf("measured %+v, planned with %v ms: want 20 requests of at least 5 ms, planned with their p95", got.Measurement, got.Plan.Input.ServiceTimeMS)
	}
}

func TestPlanBadSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string // in the error: the flag at fault, where plan names it
	}{
		{nil, "--pool"},
		{[]string{"--pool", "10"}, "--service-time"},
		{[]string{"--pool", "10", "--service-time", "-1s"}, "--service-time"},
		{[]string{"--pool", "10", "--service-time", "76ms", "--margin", "2"}, "margin"},
		{[]string{"--pool", "10", "--service-time", "76ms", "--batch", "3", "--interval", "1s"}, "interval"},
		{[]string{"--pool", "10", "--service-time", "76ms", "--measure", "http://127.0.0.1:1/"}, "--measure"},
		{[]string{"--pool", "10", "--service-time", "76ms", "--visitors", "-5"}, "--visitors"},
		{[]string{"--pool", "10", "--service-time", "76ms", "--visitors", "1000", "--arrive-over", "0s"}, "--arrive-over"},
		{[]string{"--pool", "10", "--service-time", "76ms", "--visitors", "1000", "--primary-ops", "0"}, "per-unit"},
	} {
		var stdout, stderr strings.Builder
		err := plan(context.Background(), tc.args, func(string) string { return "" }, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("plan %v: err = %v, want one naming %s", tc.args, err, tc.want)
		}
	}
	// Environment variables stand in for flags.
	var stdout strings.Builder
	env := map[string]string{"USHER_PLAN_POOL": "10", "USHER_PLAN_SERVICE_TIME": "76ms", "USHER_PLAN_MARGIN": "0.7", "USHER_PLAN_BATCH": "35"}
	if err := plan(context.Background(), nil, func(k string) string { return env[k] }, &stdout, &strings.Builder{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "16,200 visitors") {
		t.Errorf("plan from USHER_PLAN_* variables:\n%s", stdout.String())
	}
}

// TestPlanScale: --visitors adds the scale section, in text and in JSON,
// with the per-unit figures given.
func TestPlanScale(t *testing.T) {
	t.Parallel()
	out := runPlan(t, "--pool", "100", "--service-time", "70ms", "--visitors", "10000000", "--arrive-over", "10m")
	for _, want := range []string{"Scale: 10,000,000 visitors arriving over 10m0s (16,667 enters/s), admitted at 1000/s",
		"9,400,000 waiting at 10m0s", "the last is admitted at 2h46m40s", "1 primary at 111,839 calls/s", "Gbit/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan --visitors output lacks %q:\n%s", want, out)
		}
	}
	if out := runPlan(t, "--pool", "100", "--service-time", "70ms"); strings.Contains(out, "Scale:") {
		t.Errorf("a plan without --visitors has a scale section:\n%s", out)
	}
	var got struct {
		Scale struct {
			PeakWaiting int64   `json:"peak_waiting"`
			Polls       float64 `json:"polls"`
			Instances   int     `json:"instances"`
			Bandwidth   float64 `json:"bandwidth_bytes"`
			Input       struct {
				ArriveOver float64 `json:"arrive_over_s"`
				Units      struct {
					InstancePolls   float64 `json:"instance_polls"`
					PollAnswerBytes float64 `json:"poll_answer_bytes"`
				} `json:"units"`
			} `json:"input"`
		} `json:"scale"`
	}
	js := runPlan(t, "--pool", "100", "--service-time", "70ms", "--visitors", "10000000", "--arrive-over", "10m",
		"--instance-polls", "100000", "--instance-enters", "1000000", "--poll-answer-bytes", "100", "--json")
	if err := json.Unmarshal([]byte(js), &got); err != nil {
		t.Fatal(err)
	}
	sc := got.Scale
	if sc.PeakWaiting != 9_400_000 || sc.Input.ArriveOver != 600 || sc.Input.Units.InstancePolls != 1e5 || sc.Instances != 2 || sc.Bandwidth != 100*sc.Polls {
		t.Errorf("scale %+v: want 9,400,000 waiting, 600 s, the given units, 2 instances (124 k polls/s at 100 k each), 100 B × polls", sc)
	}
}

// TestPlanOpeningBurst: by default the visitors of --visitors come in an
// opening's burst, so a concert's crowd forms a line, and the active row
// says what it computes (the admissions by the peak, not admit_rate × TTL).
func TestPlanOpeningBurst(t *testing.T) {
	t.Parallel()
	out := runPlan(t, "--pool", "50", "--service-time", "100ms", "--visitors", "200000")
	for _, want := range []string{"arriving over 1m0s", "179,600 waiting at 1m0s", "the last is admitted at 9m48.235s",
		"20,400 at 1m0s, when the line peaks: all admitted by then (admit_rate × 1m0s", "max_active 61,200", "--requests-per-visitor"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan of a concert's opening lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "no line forms") {
		t.Errorf("plan of 200,000 visitors at an opening says no line forms:\n%s", out)
	}
	out = runPlan(t, "--pool", "50", "--service-time", "100ms", "--visitors", "200000", "--requests-per-visitor", "10", "--arrive-over", "5m")
	for _, want := range []string{"189,800 waiting at 5m0s", "6120 at 5m0s, when the line peaks: the admissions of the last TTL (admit_rate × 3m0s), within max_active 6120"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "pass --requests-per-visitor") {
		t.Errorf("plan with --requests-per-visitor 10 still asks for it:\n%s", out)
	}
}

// TestPlanCommandReachesAdmin: the room settings plan prints are PUT to
// the admin listener usher serve binds by default, where the route is
// (the visitors' listener answers it 404).
func TestPlanCommandReachesAdmin(t *testing.T) {
	def := func(cmd, flag string) string {
		for _, s := range helpSettings(t, cmd) {
			if s.flag == flag {
				return strings.Trim(s.def, `"`)
			}
		}
		t.Fatalf("usher %s has no --%s", cmd, flag)
		return ""
	}
	if got, want := def("plan", "usher"), "http://"+def("serve", "admin-addr"); got != want {
		t.Errorf("usher plan --usher defaults to %s, want serve's admin listener %s", got, want)
	}
}
