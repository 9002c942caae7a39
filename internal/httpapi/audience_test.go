package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/httpapi"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/sale"
	"usher/internal/token"
)

// TestAudiences: on the visitors' handler every operators' route answers as
// if it did not exist, with the admin key too (404 not_found, or 405 where
// its path has a visitors' method); on the operators' handler it asks for
// the key (401) and answers with it. Visitors' routes answer on both.
func TestAudiences(t *testing.T) {
	t.Parallel()
	keys, err := token.LoadDir(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	q := queue.New(memqueue.New(), queue.Options{Metrics: queue.NewMetrics(reg)})
	c := httpapi.Config{Queue: q, Keys: keys, AdminKey: adminKey, Registry: reg, Sale: new(sale.Service)}
	h := httpapi.New(c)
	visitorPaths := map[string]bool{}
	routes := httpapi.Routes(httpapi.Config{Registry: prometheus.NewRegistry(), Sale: c.Sale})
	for _, r := range routes {
		if r.Audience == httpapi.Visitors {
			_, path, _ := strings.Cut(r.Pattern, " ")
			visitorPaths[path] = true
		}
	}
	do := func(h http.Handler, method, path, key string) (int, string) {
		req := httptest.NewRequest(method, path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		var b struct{ Error struct{ Code string } }
		json.Unmarshal(w.Body.Bytes(), &b)
		return w.Code, b.Error.Code
	}
	admin := 0
	for _, r := range routes {
		method, pattern, _ := strings.Cut(r.Pattern, " ")
		path := strings.NewReplacer("{room}", "sale", "{id}", "1", "{hold}", "1").Replace(pattern)
		if r.Audience == httpapi.Visitors {
			continue
		}
		admin++
		wantStatus, wantCode := 404, "not_found"
		if visitorPaths[pattern] {
			wantStatus, wantCode = 405, "method_not_allowed"
		}
		if st, code := do(h.Visitors, method, path, adminKey); st != wantStatus || code != wantCode {
			t.Errorf("%s on the visitors' handler with the admin key: %d %s, want %d %s", r.Pattern, st, code, wantStatus, wantCode)
		}
		if st, code := do(h.Operators, method, path, ""); st != 401 {
			t.Errorf("%s on the operators' handler without the key: %d %s, want 401", r.Pattern, st, code)
		}
	}
	if admin < 15 {
		t.Errorf("%d operators' routes, want the admin API's (15 or more)", admin)
	}
	for _, path := range []string{"/healthz", "/api/v1/settings", "/.well-known/jwks.json"} {
		for name, h := range map[string]http.Handler{"visitors'": h.Visitors, "operators'": h.Operators} {
			if st, _ := do(h, "GET", path, ""); st != 200 {
				t.Errorf("GET %s on the %s handler: %d, want 200", path, name, st)
			}
		}
	}
	if st, _ := do(h.Operators, "GET", "/metrics", adminKey); st != 200 {
		t.Errorf("GET /metrics on the operators' handler with the key: %d, want 200", st)
	}
	if st, _ := do(h.Operators, "GET", "/api/v1/rooms", adminKey); st != 200 {
		t.Errorf("GET /api/v1/rooms on the operators' handler with the key: %d, want 200", st)
	}
}
