package httpapi_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/analytics"
	"usher/internal/analytics/analyticstest"
	"usher/internal/analytics/sqliteanalytics"
	"usher/internal/event"
	"usher/internal/httpapi"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/token"
)

// newAnalyticsEnv serves the API with analytics on SQLite.
func newAnalyticsEnv(t *testing.T) (*env, *analytics.Analytics) {
	t.Helper()
	s, err := sqliteanalytics.Open(context.Background(), filepath.Join(t.TempDir(), "analytics.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	a := analytics.New(s, analytics.Options{})
	reg := prometheus.NewRegistry()
	store := &flakyStore{Store: memqueue.New()}
	q := queue.New(store, queue.Options{})
	keys, err := token.LoadDir(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(httpapi.NewServer(httpapi.Config{Queue: q, Keys: keys, AdminKey: adminKey, Registry: reg, Analytics: a}))
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, store: store, q: q, keys: keys}, a
}

func TestRoomAnalytics(t *testing.T) {
	t.Parallel()
	e, a := newAnalyticsEnv(t)
	t0 := analyticstest.Base()
	if _, err := a.Apply(context.Background(), analyticstest.Script("sale", t0)); err != nil {
		t.Fatal(err)
	}
	q := url.Values{"from": {t0.Format(time.RFC3339)}, "to": {t0.Add(time.Hour).Format(time.RFC3339)}}
	r := e.do(nil, "GET", "/api/v1/rooms/sale/analytics?"+q.Encode(), adminKey, "")
	if r.status != 200 {
		t.Fatalf("GET analytics: %d %s", r.status, r.body)
	}
	rep := decodeInto[analytics.Report](t, r)
	if len(rep.Minutes) != 2 || rep.Totals.Arrivals != 3 || rep.Totals.Admissions != 3 || rep.Totals.Confirmed != 1 ||
		rep.Totals.Revenue != 50_000 || rep.Totals.Waited != 2 || rep.Totals.WaitP99MS < 68_000 || !rep.From.Equal(t0) {
		t.Errorf("report: %s", r.body)
	}

	// The default range is the last hour: the script is an hour old, so
	// at most its last minute is in it.
	if r := e.do(nil, "GET", "/api/v1/rooms/sale/analytics", adminKey, ""); r.status != 200 {
		t.Errorf("default range: %d %s", r.status, r.body)
	}
	for _, tc := range []struct{ query, code string }{
		{"from=yesterday", "invalid_request"},
		{"to=2026-13-01T00:00:00Z", "invalid_request"},
		{"from=2026-12-01T10:00:00Z&to=2026-12-01T10:00:00Z", "invalid_request"},
		{"from=2026-12-01T10:00:00Z&to=2026-12-01T09:00:00Z", "invalid_request"},
		{"from=2026-10-01T00:00:00Z&to=2026-12-01T00:00:00Z", "invalid_request"},
	} {
		wantError(t, e, "GET", "/api/v1/rooms/sale/analytics?"+tc.query, adminKey, 400, tc.code)
	}
	wantError(t, e, "GET", "/api/v1/rooms/Sale!/analytics", adminKey, 400, "invalid_request")
	wantError(t, e, "GET", "/api/v1/rooms/sale/analytics", "", 401, "admin_unauthorized")
	wantError(t, e, "POST", "/api/v1/rooms/sale/analytics", adminKey, 405, "method_not_allowed")
}

func TestRoomEvents(t *testing.T) {
	t.Parallel()
	e, a := newAnalyticsEnv(t)
	t0 := analyticstest.Base()
	var evs []event.Event
	for i := range 25 {
		evs = append(evs, analyticstest.Ev(fmt.Sprintf("ev-%02d", i), event.Entered, "sale", t0.Add(time.Duration(i)*time.Second), fmt.Sprintf("v%d", i), &event.Data{ETAMS: 1000}))
	}
	if _, err := a.Apply(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	type page struct {
		Events []event.Event `json:"events"`
		Next   string        `json:"next"`
	}
	var got []string
	path := "/api/v1/rooms/sale/events?limit=10"
	for range 5 {
		r := e.do(nil, "GET", path, adminKey, "")
		if r.status != 200 {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		p := decodeInto[page](t, r)
		for _, ev := range p.Events {
			got = append(got, ev.ID)
		}
		if p.Next == "" {
			break
		}
		path = "/api/v1/rooms/sale/events?limit=10&before=" + url.QueryEscape(p.Next)
	}
	if len(got) != 25 || got[0] != "ev-24" || got[24] != "ev-00" {
		t.Errorf("paged timeline: %v, want ev-24 … ev-00, each once", got)
	}
	if r := e.do(nil, "GET", "/api/v1/rooms/empty/events", adminKey, ""); r.status != 200 || string(r.body) != "{\"events\":[]}\n" {
		t.Errorf("a room without events: %d %s", r.status, r.body)
	}
	for _, q := range []string{"limit=0", "limit=501", "limit=x", "before=nope", "before=" + url.QueryEscape("cz0x")} {
		wantError(t, e, "GET", "/api/v1/rooms/sale/events?"+q, adminKey, 400, "invalid_request")
	}
	wantError(t, e, "GET", "/api/v1/rooms/sale/events", "", 401, "admin_unauthorized")
}

// TestAnalyticsDisabled: a server without analytics says so, with a code
// of its own.
func TestAnalyticsDisabled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	wantError(t, e, "GET", "/api/v1/rooms/sale/analytics", adminKey, 404, "analytics_disabled")
	wantError(t, e, "GET", "/api/v1/rooms/sale/events", adminKey, 404, "analytics_disabled")
	wantError(t, e, "GET", "/api/v1/rooms/sale/events", "", 401, "admin_unauthorized")
}
