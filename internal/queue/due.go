package queue

import (
	"container/heap"
	"time"
)

// dueRooms schedules a refresh's reads, so that a refresh costs the rooms
// it reads, not the rooms held: a room whose last view showed someone
// waiting is read at every refresh, a room nobody waits in once its view
// is IdleRefresh old (resting). A view is scheduled when it is applied;
// a room with no view is read when the room list or a wake names it. Not
// safe for concurrent use: Queue.mu guards it.
type dueRooms struct {
	every map[string]struct{}  // read at every refresh
	at    map[string]time.Time // the others: when each is due
	queue dueHeap              // at's entries, earliest first, and stale ones (skipped)
}

// viewed schedules room's next read after a view of it read at: at every
// refresh while someone waits, else at + idle.
func (d *dueRooms) viewed(room string, waiting bool, at time.Time, idle time.Duration) {
	if waiting {
		delete(d.at, room)
		d.every[room] = struct{}{}
		return
	}
	delete(d.every, room)
	d.set(room, at.Add(idle))
}

// set makes room due at t.
func (d *dueRooms) set(room string, t time.Time) {
	d.at[room] = t
	heap.Push(&d.queue, dueRoom{t, room})
}

// forget removes room from the schedule (its view is gone).
func (d *dueRooms) forget(room string) {
	delete(d.every, room)
	delete(d.at, room)
}

// take appends the rooms due at now to rooms: every room read at every
// refresh, and the others whose time came, which leave the schedule until
// a view of them is applied again (retry puts back one whose read failed).
func (d *dueRooms) take(now time.Time, rooms []string) []string {
	for room := range d.every {
		rooms = append(rooms, room)
	}
	for len(d.queue) > 0 && !d.queue[0].at.After(now) {
		e := heap.Pop(&d.queue).(dueRoom)
		if t, ok := d.at[e.room]; ok && t.Equal(e.at) { // else stale: read or rescheduled since
			delete(d.at, e.room)
			rooms = append(rooms, e.room)
		}
	}
	if len(d.queue) > 4*len(d.at)+64 { // mostly stale entries: rebuild
		d.queue = d.queue[:0]
		for room, t := range d.at {
			d.queue = append(d.queue, dueRoom{t, room})
		}
		heap.Init(&d.queue)
	}
	return rooms
}

// retry makes room due at the next refresh after now, unless a view of it
// was applied meanwhile.
func (d *dueRooms) retry(room string, now time.Time) {
	if _, ok := d.every[room]; ok {
		return
	}
	if _, ok := d.at[room]; !ok {
		d.set(room, now)
	}
}

type dueRoom struct {
	at   time.Time
	room string
}

// dueHeap is a container/heap of dueRoom, earliest first.
type dueHeap []dueRoom

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueRoom)) }
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
