package queue

import (
	"context"
	"maps"
	"time"
)

// DeleteRoom removes a room from the store (Store.DeleteRoom): unless force,
// it refuses with ErrRoomInUse while visitors wait or are active. The room
// leaves this instance's view at once, so its admission loop stops (the
// scheduler learns it from ViewRooms); other instances drop it at their
// next read of the room: at once on a Waker store, which tells them, else
// at their next list or idle read. Tickets and passes already issued for
// the room then answer ErrRoomNotFound. Creating the room again starts it
// afresh (new counters, a new draw seed).
func (q *Queue) DeleteRoom(ctx context.Context, room string, force bool) error {
	if err := checkRoom(room); err != nil {
		return err
	}
	if err := q.store.DeleteRoom(ctx, room, force, q.now()); err != nil {
		return err
	}
	q.forgetRoom(room)
	return nil
}

// forgetRoom drops the room's view and gauges, and tells ViewRooms'
// subscribers.
func (q *Queue) forgetRoom(room string) { q.dropViews([]string{room}, time.Time{}) }

// dropViews drops the rooms' views and gauges, and tells ViewRooms'
// subscribers; with readAt set, only views read before readAt (a room
// made again since keeps its view).
func (q *Queue) dropViews(rooms []string, readAt time.Time) {
	if len(rooms) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	old := *q.views.Load()
	var next map[string]*viewSlot
	for _, room := range rooms {
		slot, ok := old[room]
		if !ok || !readAt.IsZero() && slot.v.Load().At.After(readAt) {
			continue
		}
		if next == nil {
			next = maps.Clone(old)
		}
		delete(next, room)
		q.metrics.forget(room)
		q.due.forget(room)
	}
	if next == nil {
		return
	}
	q.views.Store(&next)
	if q.changed != nil {
		close(q.changed)
		q.changed = nil
	}
}
