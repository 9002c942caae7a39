package queue

import (
	"context"
	"maps"
)

// DeleteRoom removes a room from the store (Store.DeleteRoom): unless force,
// it refuses with ErrRoomInUse while visitors wait or are active. The room
// leaves this instance's view at once, so its admission loop stops (the
// scheduler learns it from ViewRooms); other instances drop it at their
// next refresh. Tickets and passes already issued for the room then answer
// ErrRoomNotFound. Creating the room again starts it afresh (new counters,
// a new draw seed).
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
func (q *Queue) forgetRoom(room string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	old := *q.views.Load()
	if _, ok := old[room]; !ok {
		return
	}
	next := maps.Clone(old)
	delete(next, room)
	q.metrics.forget(room)
	q.due.forget(room)
	q.views.Store(&next)
	if q.changed != nil {
		close(q.changed)
		q.changed = nil
	}
}
