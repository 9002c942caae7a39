package queue_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
)

// TestDeleteRoomLeavesView: a deleted room leaves this instance's view at
// once, and ViewRooms' subscribers (the admission scheduler) learn it; a
// refused deletion changes nothing.
func TestDeleteRoomLeavesView(t *testing.T) {
	ctx := context.Background()
	q := queue.New(memqueue.New(), queue.Options{})
	paused := queue.DefaultSettings()
	paused.State = queue.Paused
	for _, room := range []string{"a", "b"} {
		if err := q.PutRoom(ctx, room, paused); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := q.Enter(ctx, "a", "v"); err != nil {
		t.Fatal(err)
	}
	_, changed := q.ViewRooms()
	if err := q.DeleteRoom(ctx, "a", false); !errors.Is(err, queue.ErrRoomInUse) {
		t.Fatalf("DeleteRoom with a visitor waiting: %v, want ErrRoomInUse", err)
	}
	if _, ok := q.View("a"); !ok || closed(changed) {
		t.Fatalf("after a refused deletion: view kept %v, changed closed %v; want kept, open", ok, closed(changed))
	}
	if err := q.DeleteRoom(ctx, "a", true); err != nil {
		t.Fatal(err)
	}
	if _, ok := q.View("a"); ok {
		t.Error("the deleted room is still in the view")
	}
	rooms, _ := q.ViewRooms()
	if !closed(changed) || !slices.Equal(rooms, []string{"b"}) {
		t.Errorf("after DeleteRoom: changed closed %v, rooms %v; want closed, [b]", closed(changed), rooms)
	}
	if err := q.DeleteRoom(ctx, "Bad Name", true); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("DeleteRoom(bad id): %v, want ErrInvalid", err)
	}
}
