package queue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
)

// TestInstancesShareOneController: three instances on one store, each
// measuring a third of the origin's requests and all calling Control
// concurrently, make one controller step per period, on the samples of
// all three.
func TestInstancesShareOneController(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	store := memqueue.New()
	ctx := context.Background()
	var qs []*queue.Queue
	for range 3 {
		qs = append(qs, queue.New(store, queue.Options{Now: clock}))
	}
	set := queue.DefaultSettings()
	set.Admission, set.AdmitRate, set.TargetP95 = queue.Adaptive, 10, 100*time.Millisecond
	if err := qs[0].PutRoom(ctx, "r", set); err != nil {
		t.Fatal(err)
	}
	controlAll := func() {
		var wg sync.WaitGroup
		for _, q := range qs {
			if _, err := q.Room(ctx, "r"); err != nil { // a fresh view, as Run keeps it
				t.Fatal(err)
			}
			wg.Go(func() {
				if err := q.Control(ctx, "r"); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	for _, q := range qs {
		if err := q.PutRoom(ctx, "r", set); err != nil { // each instance's view of the room
			t.Fatal(err)
		}
	}
	controlAll() // the first step starts the controller's clock
	for period := 1; period <= 3; period++ {
		mu.Lock()
		now = now.Add(set.ControlPeriod)
		mu.Unlock()
		// Each instance alone sees 10 samples, fewer than a window needs;
		// together 30, each slow: one step halves the rate.
		for _, q := range qs {
			for range 10 {
				q.Observe("r", 500*time.Millisecond, false)
			}
		}
		controlAll()
		controlAll() // a second round in the same period steps nobody
		st, err := store.Stats(ctx, "r", clock())
		if err != nil {
			t.Fatal(err)
		}
		if st.Control.Version != int64(1+period) {
			t.Fatalf("period %d: version %d, want %d (one step per period)", period, st.Control.Version, 1+period)
		}
		if period == 1 && st.Control.Rate != 5 {
			t.Errorf("after the first window of 30 slow samples pooled from three instances: rate %v, want 5", st.Control.Rate)
		}
	}
}
