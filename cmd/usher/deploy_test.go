package main

import (
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.yaml.in/yaml/v4"

	"usher/internal/event/natsevent"
	"usher/internal/gateway"
	"usher/internal/httpapi"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/sale"
	"usher/internal/token"
)

// metricName finds the usher metric names in a PromQL expression.
var metricName = regexp.MustCompile(`\b(usher_[a-z0-9_]+|go_[a-z0-9_]+|process_[a-z0-9_]+)\b`)

// usherRegistries returns the registries of a running API server (as serve
// wires it: the Go and process collectors, the queue's metrics, the
// server's, the booking flow's) and of a running proxy.
func usherRegistries(t *testing.T) []*prometheus.Registry {
	t.Helper()
	keys, err := token.LoadDir(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	api := prometheus.NewRegistry()
	api.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	q := queue.New(memqueue.New(), queue.Options{Metrics: queue.NewMetrics(api)})
	natsevent.NewMetrics(api)
	httpapi.NewServer(httpapi.Config{Queue: q, Keys: keys, AdminKey: "k", Registry: api})
	// The booking metrics register when the service is built; nothing here
	// gathers them, so it needs no database or broker.
	sale.New(sale.Config{Queue: q, Registry: api})

	proxy := prometheus.NewRegistry()
	origin, _ := url.Parse("http://127.0.0.1:1")
	if _, err := gateway.New(gateway.Config{Origin: origin, Queue: q, Keys: keys, Registry: proxy,
		Rules: gateway.Rules{DefaultRoom: "sale"}, InsecureCookies: true}); err != nil {
		t.Fatal(err)
	}
	return []*prometheus.Registry{api, proxy}
}

// registered reports whether one of regs has a metric called name (or,
// for a histogram's _bucket, _sum and _count series, the histogram). A
// registry lists nothing before a labelled metric has a series, so it is
// asked to register a probe of that name, which it refuses when the name
// is taken.
func registered(regs []*prometheus.Registry, name string) bool {
	names := []string{name}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			names = append(names, base)
		}
	}
	for _, reg := range regs {
		for _, n := range names {
			probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: n, Help: "probe: is this name taken?"})
			if err := reg.Register(probe); err != nil {
				return true
			}
			reg.Unregister(probe)
		}
	}
	return false
}

// TestDeployMetrics: the Grafana dashboard and the Prometheus alert rules
// in deploy/ parse, and every metric they use is one usher registers.
func TestDeployMetrics(t *testing.T) {
	regs := usherRegistries(t)
	if registered(regs, "usher_no_such_metric") {
		t.Fatal("the probe finds a metric that does not exist")
	}
	used := map[string]bool{}
	check := func(where, expr string) {
		t.Helper()
		found := metricName.FindAllString(expr, -1)
		if len(found) == 0 {
			t.Errorf("%s: no usher metric in %q", where, expr)
		}
		for _, name := range found {
			used[name] = true
			if !registered(regs, name) {
				t.Errorf("%s: %s is not a metric usher registers", where, name)
			}
		}
	}

	var dash struct {
		UID        string
		Templating struct {
			List []struct {
				Name       string
				Definition string
			}
		}
		Panels []struct {
			ID      int
			Type    string
			Title   string
			GridPos struct{ X, Y, W, H int }
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal([]byte(readDoc(t, "deploy/grafana/usher.json")), &dash); err != nil {
		t.Fatalf("deploy/grafana/usher.json: %v", err)
	}
	ids := map[int]bool{}
	exprs := 0
	for _, p := range dash.Panels {
		where := "usher.json panel " + p.Title
		if ids[p.ID] {
			t.Errorf("%s: id %d twice", where, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("%s: gridPos %+v outside the 24 columns", where, p.GridPos)
		}
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("%s: no query", where)
		}
		for _, q := range p.Targets {
			check(where, q.Expr)
			exprs++
		}
	}
	for _, v := range dash.Templating.List {
		if v.Definition != "" {
			check("usher.json variable "+v.Name, v.Definition)
		}
	}
	if exprs < 15 {
		t.Errorf("usher.json has %d queries; did its form change?", exprs)
	}
	// The room settings and the booking metrics each have a panel.
	for _, name := range []string{"usher_max_active", "usher_inventory_cap", "usher_admit_rate_configured", "usher_admit_rate_current",
		"usher_holds_total", "usher_hold_ends_total", "usher_held_seats", "usher_reservations_total",
		"usher_reservation_backlog", "usher_reservation_backlog_oldest_seconds",
		"usher_reservation_batch_seconds_bucket", "usher_reservation_batch_errors_total"} {
		if !used[name] {
			t.Errorf("usher.json has no panel with %s", name)
		}
	}

	var rules struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert       string
				Expr        string
				For         string
				Labels      map[string]string
				Annotations map[string]string
			}
		}
	}
	if err := yaml.Unmarshal([]byte(readDoc(t, "deploy/prometheus/usher-alerts.yml")), &rules); err != nil {
		t.Fatalf("deploy/prometheus/usher-alerts.yml: %v", err)
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			where := "usher-alerts.yml " + r.Alert
			alerts = append(alerts, r.Alert)
			check(where, r.Expr)
			if _, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("%s: for %q: %v", where, r.For, err)
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: want a severity label, a summary and a description", where)
			}
		}
	}
	for _, want := range []string{"UsherStoreUnavailable", "UsherAdmissionStepErrors", "UsherAdmissionStalled", "UsherOriginSlow",
		"UsherReservationLag", "UsherReservationBatchErrors"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("usher-alerts.yml lacks the alert %s (has %v)", want, alerts)
		}
	}
}
