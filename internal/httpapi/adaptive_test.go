package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/wire"
)

// TestAdaptiveSettings: the adaptive settings round-trip through the API,
// and out-of-range ones answer 400 naming the setting, with nothing written.
func TestAdaptiveSettings(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	body := `{"admission":"adaptive","target_p95_ms":120,"min_admit_rate":2,"max_admit_rate":40,"control_period_ms":3000,"admit_rate":10}`
	e.putRoom("sale", body)
	r := e.do(nil, "GET", "/api/v1/rooms/sale", adminKey, "")
	var got wire.Room
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	if setting[string](got.Settings, "admission") != "adaptive" || setting[int64](got.Settings, "target_p95_ms") != 120 ||
		setting[float64](got.Settings, "min_admit_rate") != 2 || setting[float64](got.Settings, "max_admit_rate") != 40 ||
		setting[int64](got.Settings, "control_period_ms") != 3000 || got.Stats.AdmitRateCurrent != 10 {
		t.Errorf("GET room = %s, want the adaptive settings and admit_rate_current 10", r.body)
	}
	for _, tc := range []struct{ body, names string }{
		{`{"admission":"fast"}`, "admission"},
		{`{"min_admit_rate":50}`, "max_admit_rate"}, // above max 40
		{`{"max_admit_rate":1}`, "max_admit_rate"},  // below min 2
		{`{"min_admit_rate":0}`, "min_admit_rate"},
		{`{"target_p95_ms":-1}`, "target_p95"},
		{`{"target_p95_ms":60001}`, "target_p95"},
		{`{"control_period_ms":100}`, "control_period"},
	} {
		r := e.do(nil, "PUT", "/api/v1/rooms/sale", adminKey, tc.body)
		if r.status != 400 || r.errorCode(t) != "invalid_request" || !strings.Contains(string(r.body), tc.names) {
			t.Errorf("PUT %s: %d %s, want 400 invalid_request naming %s", tc.body, r.status, r.body, tc.names)
		}
	}
	if r := e.do(nil, "GET", "/api/v1/rooms/sale", adminKey, ""); !strings.Contains(string(r.body), `"min_admit_rate":2,"max_admit_rate":40`) {
		t.Errorf("after refused PUTs: %s, want the settings unchanged", r.body)
	}
}

// TestSignals: the signals endpoint takes the admin key, checks its body,
// pools reports of an adaptive room and drops those of a static one; the
// controller's step on them shows in the room's stats.
func TestSignals(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	e := newEnvClock(t, memqueue.New(), false, clock)
	e.putRoom("sale", `{"admission":"adaptive","target_p95_ms":100,"admit_rate":10}`)
	e.putRoom("plain", `{}`)
	many := "[" + strings.Repeat("1,", wire.MaxSignalSamples) + "1]"
	for _, tc := range []struct {
		room, bearer, body string
		status             int
		code               string
	}{
		{"sale", "", `{"latency_ms":[1]}`, 401, "admin_unauthorized"},
		{"sale", adminKey, `{"latency_ms":` + many + `}`, 400, "invalid_request"},
		{"sale", adminKey, `{"latency_ms":[1,-2]}`, 400, "invalid_request"},
		{"sale", adminKey, `{"latency_ms":[1e300]}`, 400, "invalid_request"},
		{"sale", adminKey, `{"errors":-1}`, 400, "invalid_request"},
		{"sale", adminKey, `{"latency_ms":["x"]}`, 400, "bad_json"},
		{"nope", adminKey, `{"latency_ms":[1]}`, 404, "room_not_found"},
	} {
		r := e.do(nil, "POST", "/api/v1/rooms/"+tc.room+"/signals", tc.bearer, tc.body)
		if r.status != tc.status || r.errorCode(t) != tc.code {
			t.Errorf("POST signals %s to %s: %d %s, want %d %s", tc.body, tc.room, r.status, r.body, tc.status, tc.code)
		}
	}
	report := func(room string, ms int) resp {
		lat := strings.TrimSuffix(strings.Repeat(fmt.Sprint(ms)+",", 100), ",")
		return e.do(nil, "POST", "/api/v1/rooms/"+room+"/signals", adminKey, `{"latency_ms":[`+lat+`],"errors":0}`)
	}
	if r := report("plain", 50); r.status != 202 || !strings.Contains(string(r.body), `"pooled":false`) {
		t.Errorf("report to a static room: %d %s, want 202 not pooled", r.status, r.body)
	}
	ctx := context.Background()
	// The first step starts the controller's clock; the next, a period
	// later, sees a p95 of 300 ms against 100 and halves the rate.
	if r := report("sale", 300); r.status != 202 || !strings.Contains(string(r.body), `"pooled":true`) {
		t.Fatalf("report: %d %s, want 202 pooled", r.status, r.body)
	}
	if err := e.q.Control(ctx, "sale"); err != nil {
		t.Fatal(err)
	}
	advance(2 * time.Second)
	report("sale", 300)
	if err := e.q.Control(ctx, "sale"); err != nil {
		t.Fatal(err)
	}
	r := e.do(nil, "GET", "/api/v1/rooms/sale", adminKey, "")
	var got wire.Room
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	if st := got.Stats; st.AdmitRateCurrent != 5 || st.OriginP95MS == nil || *st.OriginP95MS < 270 || *st.OriginP95MS > 330 || *st.TargetP95MS != 100 {
		t.Errorf("stats after an overloaded window = %s, want admit_rate_current 5, origin_p95_ms ≈ 300, target_p95_ms 100", r.body)
	}
	if m := e.do(nil, "GET", "/metrics", adminKey, ""); !strings.Contains(string(m.body), `usher_admit_rate_current{room="sale"} 5`) {
		t.Error("metrics lack usher_admit_rate_current 5 for the room")
	} else if want := "usher_admit_rate_configured{room=\"sale\"} 10\n"; !strings.Contains(string(m.body), want) {
		t.Errorf("metrics lack %q: the configured rate beside the controller's", want)
	} else if want := fmt.Sprintf("usher_max_active{room=\"sale\"} %d\n", queue.DefaultSettings().MaxActive); !strings.Contains(string(m.body), want) {
		t.Errorf("metrics lack %q", want)
	}
	// Static, then adaptive again: the controller starts afresh from
	// admit_rate.
	e.putRoom("sale", `{"admission":"static"}`)
	if r := e.do(nil, "GET", "/api/v1/rooms/sale", adminKey, ""); !strings.Contains(string(r.body), `"admit_rate_current":10}`) {
		t.Errorf("static room: %s, want admit_rate_current 10 (admit_rate)", r.body)
	}
	e.putRoom("sale", `{"admission":"adaptive"}`)
	if r := e.do(nil, "GET", "/api/v1/rooms/sale", adminKey, ""); !strings.Contains(string(r.body), `"admit_rate_current":10}`) {
		t.Errorf("room made adaptive again: %s, want the controller reset to admit_rate 10", r.body)
	}
}
