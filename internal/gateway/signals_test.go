package gateway

import (
	"context"
	"net/http"
	"testing"
	"time"

	"usher/internal/queue"
	"usher/internal/testenv"
)

// TestProxyFeedsAdaptiveAdmission: gated requests that the origin answers
// with 503 reach the room's controller, which halves the rate.
func TestProxyFeedsAdaptiveAdmission(t *testing.T) {
	t.Parallel()
	origin := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	})
	e := newEnv(t, origin, Rules{})
	ctx := context.Background()
	set := queue.DefaultSettings()
	set.Admission, set.AdmitRate, set.ControlPeriod = queue.Adaptive, 20, queue.MinControlPeriod
	if err := e.q.PutRoom(ctx, "sale", set); err != nil {
		t.Fatal(err)
	}
	pass := e.admit("sale", "alice", time.Time{})
	if err := e.q.Control(ctx, "sale"); err != nil { // starts the controller's clock
		t.Fatal(err)
	}
	get := func(path string) {
		req, _ := http.NewRequest("GET", e.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+pass)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("GET %s: %d, want the origin's 503", path, res.StatusCode)
		}
	}
	for range queue.MinSamples {
		get("/seats")
	}
	testenv.Eventually(t, time.Minute, "the controller's step on a window of 503s", func() bool {
		if err := e.q.Control(ctx, "sale"); err != nil {
			t.Fatal(err)
		}
		v, _ := e.q.View("sale")
		return v.Control.Version >= 2
	})
	if v, _ := e.q.View("sale"); v.Settings.CurrentRate(v.Control) != 10 {
		t.Errorf("rate after a window of 503s = %v, want 20 halved (control %+v)", v.Settings.CurrentRate(v.Control), v.Control)
	}
}
