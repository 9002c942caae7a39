package redishold_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"usher/internal/hold"
	"usher/internal/hold/redishold"
	"usher/internal/testenv"
)

// TestEndDuringSlotMigration releases a hold while its scope's slot is half
// moved between two primaries of a cluster of the test's own: one of the
// hold's two seat keys (which end.lua does not declare: it reads them from
// the hold's record) is already on the target, every other key still on
// the source. Redis would run the script on the source and fail it at the
// moved key, after it freed the first seat: a hold that keeps a seat it no
// longer has. The guard key makes the cluster refuse the script before it
// runs (TRYAGAIN, retried until the deadline): the release fails
// unavailable and changes nothing, and succeeds once the slot has moved.
func TestEndDuringSlotMigration(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, 3)
	c := cl.Client(t)
	ctx := context.Background()
	const prefix, scope = "t:", "show"
	s := redishold.New(c, prefix)
	now := time.Now()
	if err := s.SetStock(ctx, scope, 10); err != nil {
		t.Fatal(err)
	}
	h, err := s.HoldSeats(ctx, scope, "alice", []string{"A1", "A2"}, 5, time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	slot, err := c.Do(ctx, c.B().ClusterKeyslot().Key(prefix+"{"+scope+"}:stock").Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	from, err := cl.Owner(int(slot))
	if err != nil {
		t.Fatal(err)
	}
	to := cl.Other(from)
	if err := cl.BeginMove(int(slot), from, to); err != nil {
		t.Fatal(err)
	}
	if err := cl.Migrate(from, to, prefix+"{"+scope+"}:seat:A2"); err != nil {
		t.Fatal(err)
	}

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := s.Release(short, scope, h.ID, now); !errors.Is(err, hold.ErrUnavailable) {
		t.Fatalf("Release while the slot is half moved = %v, want unavailable (TRYAGAIN until the deadline)", err)
	}
	if _, err := cl.MoveSlot(int(slot), from, to, 10); err != nil {
		t.Fatal(err)
	}
	for _, seat := range h.Seats {
		got, err := s.Find(ctx, scope, seat, now)
		if err != nil || got.ID != h.ID {
			t.Errorf("after the failed release, Find(%s) = %v, %v; want the hold %s still whole", seat, got.ID, err, h.ID)
		}
	}
	if err := s.Release(ctx, scope, h.ID, now); err != nil {
		t.Fatalf("Release after the move: %v", err)
	}
	if _, err := s.HoldSeats(ctx, scope, "bob", []string{"A1", "A2"}, 2, time.Minute, now); err != nil {
		t.Fatalf("the released seats cannot be held again: %v", err)
	}
	if n, err := s.Stock(ctx, scope, now); err != nil || n != 10 {
		t.Errorf("Stock = %d, %v; want 10", n, err)
	}
}
