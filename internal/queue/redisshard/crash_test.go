package redisshard_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"usher/internal/queue"
	"usher/internal/queue/redisshard"
	"usher/internal/testenv"
)

// TestCrashedStep plays an admission step that stops after its pop, and
// one that stops after its commit, by running their first calls by hand,
// then checks what docs/architecture.md#redis-hot-room-sharding promises: the reservation holds
// its slots until its lease ends; then the taken visitors are back in line
// in their places, and those already committed are dropped, never
// admitted twice or beyond the cap.
func TestCrashedStep(t *testing.T) {
	c := testenv.Redis(t)
	ctx := context.Background()
	s := redisshard.New(c, testenv.RedisPrefix(t, c), 5*time.Second)
	t0 := time.UnixMilli(1_800_000_000_000)
	const name, k = "crash", 3
	set := redisshard.Settings{Shards: k, Strategy: redisshard.Counter, MaxActive: 10, AdmitRate: 1000, Interval: 100 * time.Millisecond, ActiveTTL: time.Hour, ClaimWindow: time.Minute}
	if err := s.PutRoom(ctx, name, set); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if _, _, err := s.Enter(ctx, name, fmt.Sprintf("v%02d", i), t0); err != nil {
			t.Fatal(err)
		}
	}
	// crash runs a step's reserve and pops (and its commit when commit is
	// set) at now, and returns what it took.
	crash := func(id string, now time.Time, commit bool) []string {
		t.Helper()
		n, taken, err := s.CrashStep(ctx, name, set, id, now, commit)
		if err != nil || n != 10 {
			t.Fatalf("crashed step reserved %d (%v); want 10 slots", n, err)
		}
		return taken
	}

	taken := crash("crashed-after-pop", t0, false)
	if want := []string{"v00", "v01", "v02", "v03", "v04", "v05", "v06", "v07", "v08", "v09"}; !slices.Equal(taken, want) {
		t.Fatalf("the crashed step took %v, want %v", taken, want)
	}
	if e, err := s.Status(ctx, name, "v03", t0); err != nil || e.Status != queue.Waiting || e.Position != 1 || e.Score != 4 {
		t.Errorf("Status of a visitor taken by a step in flight = %+v, %v; want waiting at 1, its score (4th entered)", e, err)
	}
	if e, err := s.Status(ctx, name, "v10", t0); err != nil || e.Position != 1 {
		t.Errorf("Status of the first visitor left in line = %+v, %v; want position 1", e, err)
	}
	r, err := s.Admit(ctx, name, t0.Add(time.Second))
	if err != nil || r.Reserved != 0 || len(r.Admitted) != 0 {
		t.Errorf("Admit within the lease = %+v, %v; want nothing (the crashed step's reservation holds every slot)", r, err)
	}
	r, err = s.Admit(ctx, name, t0.Add(6*time.Second))
	if err != nil || !slices.Equal(r.Admitted, taken) {
		t.Errorf("Admit after the lease = %+v, %v; want the visitors the crashed step took, in their order: %v", r, err, taken)
	}

	// Free the slots; a step then commits v10–v19 and stops before its
	// acknowledgements: they are active, out of the shards' copies, and
	// Status says so (it asks the home shard about a visitor in a step's
	// record).
	for _, v := range r.Admitted {
		if err := s.Leave(ctx, name, v); err != nil {
			t.Fatal(err)
		}
	}
	t1 := t0.Add(time.Minute)
	committed := crash("crashed-after-commit", t1, true)
	for _, v := range committed {
		if e, err := s.Status(ctx, name, v, t1); err != nil || e.Status != queue.Active {
			t.Errorf("Status of %s, committed but not acknowledged = %+v, %v; want active", v, e, err)
		}
	}
	// After the lease they are put back in line, taken again by the next
	// steps and dropped: nobody new is admitted while they hold the cap.
	r, err = s.Admit(ctx, name, t1.Add(6*time.Second))
	if err != nil || len(r.Admitted) != 0 {
		t.Errorf("Admit after the lease, the cap held by the committed = %+v, %v; want none admitted", r, err)
	}
	for _, v := range committed[:3] {
		if err := s.Leave(ctx, name, v); err != nil {
			t.Fatal(err)
		}
	}
	// v10–v12 left while taken: not put back. v13–v19 come back in
	// line and the steps that take them drop them (a step admits fewer
	// meanwhile), then v20–v22 fill the three free slots.
	var admitted []string
	var dropped int64
	for i := 0; len(admitted) < 3 && i < 10; i++ {
		r, err := s.Admit(ctx, name, t1.Add(7*time.Second+time.Duration(i)*100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		admitted, dropped = append(admitted, r.Admitted...), dropped+r.Dropped
	}
	if want := []string{"v20", "v21", "v22"}; !slices.Equal(admitted, want) || dropped != 7 {
		t.Errorf("after 3 left, admitted %v and dropped %d; want %v admitted and the 7 still active dropped", admitted, dropped, want)
	}
	if n := activeCount(t, c, s, name); n != 10 {
		t.Errorf("active set holds %d, want max_active 10", n)
	}
}
