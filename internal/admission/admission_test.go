package admission_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"usher/internal/admission"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/testenv"
)

// TestSchedulerAdmits runs a real scheduler until it has admitted the whole
// queue in arrival order, never exceeding MaxActive.
func TestSchedulerAdmits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := memqueue.New()
	q := queue.New(store, queue.Options{})
	s := queue.DefaultSettings()
	s.State, s.MaxActive, s.AdmitRate, s.Interval = queue.Paused, 5, 1000, 10*time.Millisecond
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, _, err := q.Enter(ctx, "r", fmt.Sprintf("v%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	s.State = queue.Open
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { done <- admission.New(q, slog.New(slog.DiscardHandler)).Run(ctx) }()
	go func() { done <- q.Run(ctx) }()

	// Each admitted visitor finishes at once, freeing its slot; the order in
	// which they reach the front must be arrival order.
	for i := range 20 {
		v := fmt.Sprintf("v%02d", i)
		testenv.Eventually(t, 30*time.Second, v+" admitted", func() bool {
			e, err := store.Status(ctx, "r", v, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if e.Status == queue.Active {
				return true
			}
			st, _ := store.Stats(ctx, "r", time.Now())
			if st.Active > s.MaxActive {
				t.Fatalf("active = %d > %d", st.Active, s.MaxActive)
			}
			if e.Status == queue.Gone {
				t.Fatalf("%s is gone before it was admitted", v)
			}
			return false
		})
		// FIFO: with v00…v(i-1) gone, only v(i)…v(i+4) may be active.
		if later := fmt.Sprintf("v%02d", i+int(s.MaxActive)); i+int(s.MaxActive) < 20 {
			if e, _ := store.Status(ctx, "r", later, time.Now()); e.Status == queue.Active {
				t.Fatalf("%s admitted while %s was still first", later, v)
			}
		}
		if err := q.Leave(ctx, "r", v); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("Run returned %v, want nil after cancel", err)
		}
	}
}
