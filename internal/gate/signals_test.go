package gate_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"usher/internal/gate"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/token"
)

// TestMiddlewareMeasures: the middleware reports the handler it wraps to
// the room's adaptive controller: a handler that fails with 5xx drives the
// rate down; with Unmeasured nothing is reported.
func TestMiddlewareMeasures(t *testing.T) {
	for _, unmeasured := range []bool{false, true} {
		var mu sync.Mutex
		now := time.Now()
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		q := queue.New(memqueue.New(), queue.Options{Now: clock})
		set := queue.DefaultSettings()
		set.Admission, set.AdmitRate = queue.Adaptive, 20
		ctx := context.Background()
		if err := q.PutRoom(ctx, "sale", set); err != nil {
			t.Fatal(err)
		}
		keys, err := token.LoadDir(t.TempDir(), time.Now)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := q.Enter(ctx, "sale", "alice"); err != nil {
			t.Fatal(err)
		}
		pass, err := keys.SignPass(token.Pass{Room: "sale", Visitor: "alice", ExpiresAt: time.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		g := gate.New(q, keys, gate.Options{Room: func(*http.Request) string { return "sale" }, Unmeasured: unmeasured})
		h := g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "down", http.StatusServiceUnavailable)
		}))
		step := func() {
			for range queue.MinSamples {
				req := httptest.NewRequest("GET", "/seats", nil)
				req.Header.Set("Authorization", "Bearer "+pass)
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
			if err := q.Control(ctx, "sale"); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			now = now.Add(set.ControlPeriod)
			mu.Unlock()
		}
		step() // starts the controller's clock
		step() // a window of failures: halve
		v, err := q.Room(ctx, "sale")
		if err != nil {
			t.Fatal(err)
		}
		want := 10.0
		if unmeasured {
			want = 20 // nothing reported: the rate holds
		}
		if got := v.Settings.CurrentRate(v.Control); got != want {
			t.Errorf("unmeasured=%v: rate after a window of 503s = %v, want %v", unmeasured, got, want)
		}
	}
}
