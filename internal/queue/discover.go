package queue

import (
	"maps"
	"slices"
)

// ViewRooms returns the rooms this instance has a view of, sorted, and a
// channel that is closed when that set next changes: when Run finds a room
// the store lists and the view lacks, or finds that the store no longer has
// a room, or when PutRoom or EnsureRoom create one here. Call it again after
// the channel closes. Without Run, rooms join the set only through PutRoom
// and EnsureRoom and never leave it.
func (q *Queue) ViewRooms() (rooms []string, changed <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.changed == nil {
		q.changed = make(chan struct{})
	}
	return slices.Sorted(maps.Keys(*q.views.Load())), q.changed
}

// WaitingRooms returns the rooms whose latest view showed someone waiting,
// in no order: at most the rooms held, usually far fewer.
func (q *Queue) WaitingRooms() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Collect(maps.Keys(q.due.every))
}
