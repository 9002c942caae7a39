package queue_test

import (
	"context"
	"slices"
	"testing"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestViewRooms: the channel closes when a room joins the view, not when a
// known room's settings change.
func TestViewRooms(t *testing.T) {
	ctx := context.Background()
	q := queue.New(memqueue.New(), queue.Options{})
	rooms, changed := q.ViewRooms()
	if len(rooms) != 0 || closed(changed) {
		t.Fatalf("new queue: rooms %v, changed closed %v; want none, open", rooms, closed(changed))
	}
	if err := q.PutRoom(ctx, "b", queue.DefaultSettings()); err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnsureRoom(ctx, "a", queue.DefaultSettings()); err != nil {
		t.Fatal(err)
	}
	if !closed(changed) {
		t.Fatal("rooms created, but the channel is still open")
	}
	rooms, changed = q.ViewRooms()
	if want := []string{"a", "b"}; !slices.Equal(rooms, want) {
		t.Fatalf("rooms = %v, want %v", rooms, want)
	}
	s := queue.DefaultSettings()
	s.State = queue.Paused
	if err := q.PutRoom(ctx, "a", s); err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnsureRoom(ctx, "b", queue.DefaultSettings()); err != nil {
		t.Fatal(err)
	}
	if closed(changed) {
		t.Error("settings changed, the set did not, but the channel closed")
	}
}
