package gate_test

import (
	"testing"
	"time"

	"usher/internal/queue"
	"usher/internal/wire"
)

// TestEntryWords pins the words queue and wire share: the room states a
// visitor is told, and a pre-queue place's answer.
func TestEntryWords(t *testing.T) {
	for _, tc := range []struct {
		queue queue.RoomState
		wire  string
	}{
		{queue.Open, wire.RoomOpen}, {queue.Paused, wire.RoomPaused}, {queue.Closed, wire.RoomClosed},
		{queue.SoldOut, wire.RoomSoldOut}, {queue.InPreQueue, wire.RoomPreQueue},
	} {
		if string(tc.queue) != tc.wire {
			t.Errorf("queue's %q is wire's %q", tc.queue, tc.wire)
		}
	}
	opens := time.Date(2026, 12, 24, 20, 0, 0, 0, time.UTC)
	got := wire.EntryFor(wire.Place{Room: "sale", RoomState: string(queue.InPreQueue), Status: string(queue.Waiting),
		ETA: 90 * time.Second, PollAfter: 8 * time.Second, OpensAt: opens})
	if got.State != wire.StateWaiting || got.RoomState != wire.RoomPreQueue || got.OpensAt == nil || !got.OpensAt.Equal(opens) ||
		got.ETASeconds != 90 || got.PollAfterMS != 8000 {
		t.Errorf("pre-queue entry: %+v", got)
	}
}
