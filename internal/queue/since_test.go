package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
)

// lossyStore is a store that may have lost places before since (a Redis
// failover, as redisqueue's Stats.Since reports it).
type lossyStore struct {
	queue.Store
	since time.Time
}

func (s *lossyStore) Stats(ctx context.Context, room string, now time.Time) (queue.Stats, error) {
	st, err := s.Store.Stats(ctx, room, now)
	st.Since = s.since
	return st, err
}

// TestLostPlaceFoundAtOnce: after the store reports that it may have lost
// places (Stats.Since), a far-back poll on an older ticket is answered by
// the store: a lost place is found at the next poll, not when it would
// have reached the front. A place that was not lost gets a new ticket, so
// that its next polls are estimates again.
func TestLostPlaceFoundAtOnce(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
	mem := memqueue.New()
	store := &lossyStore{Store: mem}
	q := queue.New(store, queue.Options{Now: c.now})
	s := queue.DefaultSettings()
	s.State, s.AdmitRate = queue.Paused, 1
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	issued := c.t
	for i := 1; i <= 300; i++ {
		if _, _, err := q.Enter(ctx, "r", fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// The store loses v250's place (a failover dropped its entry).
	if err := mem.Leave(ctx, "r", "v250"); err != nil {
		t.Fatal(err)
	}
	refresh := func() {
		t.Helper()
		if err := q.PutRoom(ctx, "r", s); err != nil { // reads the view anew
			t.Fatal(err)
		}
	}
	refresh()
	if e, estimated, err := q.Status(ctx, "r", "v250", 250, issued); err != nil || !estimated || e.Status != queue.Waiting {
		t.Fatalf("lost place before the store says so: %+v, estimated %v, %v; want an estimate (the loss unknown)", e, estimated, err)
	}

	c.t = c.t.Add(2 * time.Second)
	store.since = c.t.Add(-time.Second)
	refresh()
	if e, estimated, err := q.Status(ctx, "r", "v250", 250, issued); err != nil || estimated || e.Status != queue.Gone {
		t.Errorf("lost place after the store says it may have lost places: %+v, estimated %v, %v; want gone, from the store", e, estimated, err)
	}
	e, estimated, err := q.Status(ctx, "r", "v260", 260, issued)
	if err != nil || estimated || e.Status != queue.Waiting || !q.Reticket("r", e, 260, issued) {
		t.Errorf("kept place on an older ticket: %+v, estimated %v, %v; want exact and a new ticket", e, estimated, err)
	}
	if _, estimated, _ := q.Status(ctx, "r", "v260", 260, c.t); !estimated || q.Reticket("r", e, 260, c.t) {
		t.Errorf("kept place on a new ticket: estimated %v; want an estimate, and no further ticket", estimated)
	}
}
