package queue_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
)

// TestAdmittedIsWhatHappened: the measured admission rate counts the
// admissions of the last AdmittedWindow on the queue's clock. A room whose
// cap holds it to one visitor at a time, which admitted three in all,
// never shows more than that; it is 0 when nobody was admitted in the
// window, and it does not jump to the configured rate when the room
// opens again (the ETA's Rate does; the measurement does not).
func TestAdmittedIsWhatHappened(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
	q := queue.New(memqueue.New(), queue.Options{Now: c.now})
	s := queue.DefaultSettings()
	s.State, s.MaxActive, s.AdmitRate, s.ActiveTTL, s.ClaimWindow = queue.Paused, 1, 50, 4*time.Second, 4*time.Second
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, _, err := q.Enter(ctx, "r", fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	s.State = queue.Open
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	admitted := func() (float64, int64) {
		t.Helper()
		if err := refresh(ctx, q); err != nil {
			t.Fatal(err)
		}
		v, _ := q.View("r")
		return v.Admitted(), v.AdmittedTotal
	}
	if got, _ := admitted(); got != 0 {
		t.Errorf("before any step: %v/s, want 0", got)
	}
	// Steps every 100 ms for 12 s: a slot frees every 4 s, so three are
	// admitted (the first at once), 3 ÷ 10 s at most in any window.
	for range 120 {
		c.t = c.t.Add(100 * time.Millisecond)
		if _, err := q.Admit(ctx, "r"); err != nil {
			t.Fatal(err)
		}
		got, total := admitted()
		if got > 0.4 || got < 0 {
			t.Fatalf("at %v with %d admitted in all: measured %v/s, want at most 3 in 10 s", c.t, total, got)
		}
	}
	if _, total := admitted(); total != 3 {
		t.Fatalf("admitted %d in 12 s, want 3 (one slot, 4 s each)", total)
	}
	// Paused for 11 s: nothing admitted in the window, 0.
	s.State = queue.Paused
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	for range 110 {
		c.t = c.t.Add(100 * time.Millisecond)
		admitted()
	}
	if got, _ := admitted(); got != 0 {
		t.Errorf("paused for 11 s: %v/s, want 0", got)
	}
	// Opened again, before any step: still 0, where the ETA's Rate takes
	// the rate in force.
	s.State = queue.Open
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	got, _ := admitted()
	if v, _ := q.View("r"); got != 0 || math.Abs(v.Rate-50) > 1e-9 {
		t.Errorf("just opened: measured %v/s (want 0), the ETA's rate %v (want the 50/s in force)", got, v.Rate)
	}
}
