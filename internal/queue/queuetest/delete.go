package queuetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"usher/internal/queue"
)

// testDeleteRoom: DeleteRoom removes a room whole (listed no more, every
// method answers ErrRoomNotFound, a room created again under the name
// starts afresh); it refuses with ErrRoomInUse, changing nothing, while
// someone waits or holds an unexpired slot, unless forced; an unknown
// room is ErrRoomNotFound.
func testDeleteRoom(t *testing.T, s queue.Store) {
	ctx := context.Background()
	if err := s.DeleteRoom(ctx, "nope", false, t0); !errors.Is(err, queue.ErrRoomNotFound) {
		t.Errorf("DeleteRoom of an unknown room: err = %v, want ErrRoomNotFound", err)
	}

	set := settings(10, 100)
	mustPut(t, s, "keep", set)
	vs := fill(t, s, "r", set, 2)
	if err := s.DeleteRoom(ctx, "r", false, t0); !errors.Is(err, queue.ErrRoomInUse) {
		t.Fatalf("DeleteRoom with visitors waiting: err = %v, want ErrRoomInUse", err)
	}
	if st := mustStats(t, s, "r", t0); st.Waiting != 2 || st.LastSeq != 2 {
		t.Errorf("after a refused DeleteRoom: waiting %d, last seq %d; want 2, 2 (unchanged)", st.Waiting, st.LastSeq)
	}
	if e := mustStatus(t, s, "r", vs[0], t0); e.Status != queue.Waiting || e.Position != 1 {
		t.Errorf("after a refused DeleteRoom: %s = %+v, want waiting at position 1", vs[0], e)
	}

	// Admitted but not waiting: still in use until the slot expires.
	res := mustAdmit(t, s, "r", t0)
	if len(res.Admitted) != 2 {
		t.Fatalf("Admit = %+v, want both admitted", res)
	}
	if err := s.DeleteRoom(ctx, "r", false, t0.Add(time.Second)); !errors.Is(err, queue.ErrRoomInUse) {
		t.Fatalf("DeleteRoom with visitors active: err = %v, want ErrRoomInUse", err)
	}
	// After the claim window the slots have lapsed: nobody is in the room.
	if err := s.DeleteRoom(ctx, "r", false, t0.Add(set.ClaimWindow+time.Second)); err != nil {
		t.Fatalf("DeleteRoom once the slots expired: %v", err)
	}
	assertDeleted(t, s, "r")
	if got, err := s.Rooms(ctx); err != nil || !slices.Equal(got, []string{"keep"}) {
		t.Errorf("Rooms after DeleteRoom = %v, %v; want [keep]", got, err)
	}

	// Created again: a new room, numbering from 1.
	mustPut(t, s, "r", set)
	if e := mustEnter(t, s, "r", "again", t0.Add(time.Hour)); e.Seq != 1 {
		t.Errorf("first entry of a room created again = %+v, want seq 1", e)
	}

	// Forced: waiting, pre-queue and active visitors go with it.
	drawn := drawSettings(t0.Add(time.Hour))
	mustPut(t, s, "pre", drawn)
	mustEnter(t, s, "pre", "p1", t0)
	if err := s.DeleteRoom(ctx, "pre", false, t0); !errors.Is(err, queue.ErrRoomInUse) {
		t.Fatalf("DeleteRoom with a pre-queue entrant: err = %v, want ErrRoomInUse", err)
	}
	if err := s.DeleteRoom(ctx, "pre", true, t0); err != nil {
		t.Fatalf("forced DeleteRoom: %v", err)
	}
	assertDeleted(t, s, "pre")
	mustPut(t, s, "pre", drawn)
	if st := mustStats(t, s, "pre", t0); st.Waiting != 0 || st.Draw.Entrants != 0 {
		t.Errorf("a forced-deleted room created again: waiting %d, draw entrants %d; want 0, 0", st.Waiting, st.Draw.Entrants)
	}
	if err := s.DeleteRoom(ctx, "pre", true, t0); err != nil {
		t.Fatalf("forced DeleteRoom of an empty room: %v", err)
	}
	if err := s.DeleteRoom(ctx, "pre", true, t0); !errors.Is(err, queue.ErrRoomNotFound) {
		t.Errorf("DeleteRoom twice: err = %v, want ErrRoomNotFound", err)
	}
}

// assertDeleted checks that every method answers ErrRoomNotFound for room.
func assertDeleted(t *testing.T, s queue.Store, room string) {
	t.Helper()
	ctx := context.Background()
	checks := map[string]error{}
	_, _, checks["Enter"] = s.Enter(ctx, room, "v", t0, queue.EnterOptions{})
	_, checks["Status"] = s.Status(ctx, room, "v", t0)
	_, checks["Admit"] = s.Admit(ctx, room, t0)
	_, checks["Stats"] = s.Stats(ctx, room, t0)
	checks["SetInventory"] = s.SetInventory(ctx, room, 1)
	for op, err := range checks {
		if !errors.Is(err, queue.ErrRoomNotFound) {
			t.Errorf("%s on a deleted room: err = %v, want ErrRoomNotFound", op, err)
		}
	}
	rooms, err := s.Rooms(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(rooms, room) {
		t.Errorf("Rooms = %v, still lists the deleted room %s", rooms, room)
	}
}
