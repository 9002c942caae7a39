package admission_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
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

// admitCounter is a store that counts its Admit calls by room.
type admitCounter struct {
	queue.Store
	mu sync.Mutex
	n  map[string]int
}

func (s *admitCounter) Admit(ctx context.Context, room string, now time.Time) (queue.AdmitResult, error) {
	s.mu.Lock()
	s.n[room]++
	s.mu.Unlock()
	return s.Store.Admit(ctx, room, now)
}

func (s *admitCounter) count(room string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[room]
}

// TestSchedulerRestsIdleRooms: rooms nobody waits in get no admission
// step, however many intervals pass; a visitor who comes to wait in one
// is admitted by the next step.
func TestSchedulerRestsIdleRooms(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := &admitCounter{Store: memqueue.New(), n: map[string]int{}}
	q := queue.New(store, queue.Options{Refresh: 5 * time.Millisecond})
	s := queue.DefaultSettings()
	s.MaxActive, s.Interval = 1, 10*time.Millisecond
	for i := range 10 {
		if err := q.PutRoom(ctx, fmt.Sprintf("r%d", i), s); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := q.Enter(ctx, "r0", "first"); err != nil { // passthrough: takes r0's one slot
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { admission.New(q, slog.New(slog.DiscardHandler)).Run(ctx) })
	wg.Go(func() { q.Run(ctx) })
	defer wg.Wait()
	defer cancel()

	// r0's slot is taken; "second" waits until "first" leaves.
	if _, _, err := q.Enter(ctx, "r0", "second"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "r0 stepped while second waits", func() bool { return store.count("r0") >= 3 })
	if err := q.Leave(ctx, "r0", "first"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "second admitted", func() bool {
		e, _, err := q.Status(ctx, "r0", "second", 0, time.Time{})
		return err == nil && e.Status == queue.Active
	})
	for i := 1; i < 10; i++ {
		if n := store.count(fmt.Sprintf("r%d", i)); n != 0 {
			t.Errorf("idle room r%d got %d admission steps, want 0", i, n)
		}
	}
}
