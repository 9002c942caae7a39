package queue

import (
	"context"
	"math"
	"sync"
	"time"

	"usher/internal/queue/forecast"
)

// Held status polls (a long poll in the turn zone): a waiting visitor a
// step or two from its turn may ask its status poll to be held until the
// turn comes, so that it learns of it within a view refresh instead of at
// its next poll. Limits: at most one held poll per visitor and room (a
// second one answers the first at once), at most Options.MaxHeld per
// instance (beyond, polls are answered at once, as without holding), none
// while Run is not running (before it, and from the moment its context
// ends: a shutdown waits for no held poll), and none longer than
// MaxTurnWait.
const (
	// MaxTurnWait is the longest a status poll is held.
	MaxTurnWait = 20 * time.Second
	// DefaultMaxHeld is Options.MaxHeld's default.
	DefaultMaxHeld = 10_000
)

// TurnZone is the places from the head whose status polls may be held
// (AwaitTurn): two admission steps, and at least five seconds of
// admissions at the highest of view v's rates, never beyond the near zone
// (whose polls reach the store anyway).
func (v *View) TurnZone() int64 {
	s := v.Settings
	s.AdmitRate = v.topRate()
	return min(v.Near(), max(2*s.Batch(), int64(math.Ceil(5*s.AdmitRate))))
}

// heldPoll is one held status poll.
type heldPoll struct {
	seq int64
	// wake is signalled (buffered, never blocks) when the poll should
	// read the store again: this instance admitted the visitor, or the
	// view shows admissions past its place.
	wake chan struct{}
	// done is closed when the poll must answer at once: another poll of
	// the same visitor took its place, or Run ended.
	done chan struct{}
	once sync.Once
}

func (h *heldPoll) end() { h.once.Do(func() { close(h.done) }) }

func (h *heldPoll) signal() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// turns are an instance's held polls, by room and visitor.
type turns struct {
	mu     sync.Mutex
	open   bool // Run is running
	max, n int
	rooms  map[string]map[string]*heldPoll
}

// hold registers a held poll for visitor in room, ending the visitor's
// previous one; nil when polls are not held (Run is not running, or the
// instance holds max).
func (t *turns) hold(room, visitor string, seq int64) *heldPoll {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.open {
		return nil
	}
	held := t.rooms[room]
	if old := held[visitor]; old != nil {
		old.end()
		t.n--
	} else if t.n >= t.max {
		return nil
	}
	if held == nil {
		held = make(map[string]*heldPoll)
		t.rooms[room] = held
	}
	h := &heldPoll{seq: seq, wake: make(chan struct{}, 1), done: make(chan struct{})}
	held[visitor] = h
	t.n++
	return h
}

// release forgets h, unless another poll of the visitor took its place.
func (t *turns) release(room, visitor string, h *heldPoll) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if held := t.rooms[room]; held[visitor] == h {
		delete(held, visitor)
		t.n--
		if len(held) == 0 {
			delete(t.rooms, room)
		}
	}
}

// setOpen starts or stops holding; stopping answers every held poll.
func (t *turns) setOpen(open bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.open = open
	if open {
		return
	}
	for _, held := range t.rooms {
		for _, h := range held {
			h.end()
		}
	}
}

// admitted wakes the held polls of the visitors an admission step of this
// instance admitted in room.
func (t *turns) admitted(room string, visitors []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	held := t.rooms[room]
	if len(held) == 0 {
		return
	}
	for _, v := range visitors {
		if h := held[v]; h != nil {
			h.signal()
		}
	}
}

// refreshed wakes the held polls in room whose place the view's head
// passed (admitted, here or by another instance, or gone), when the view
// counted admissions since the last one (so that a visitor the head
// passed without admitting it, a parked one, reads the store once per
// step, not per refresh).
func (t *turns) refreshed(room string, prev, next *View) {
	changed := next.EffectiveState() != prev.EffectiveState()
	if next.AdmittedTotal <= prev.AdmittedTotal && !changed {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, h := range t.rooms[room] {
		if h.seq < next.HeadSeq || changed {
			h.signal()
		}
	}
}

// Held counts the status polls this instance holds.
func (q *Queue) Held() int {
	q.turns.mu.Lock()
	defer q.turns.mu.Unlock()
	return q.turns.n
}

// AwaitTurn holds a waiting visitor's status poll until its turn, for at
// most wait (MaxTurnWait at most). e is the visitor's entry from Status
// on a ticket with sequence number seq. The poll is held only when e
// waits in line (not in the pre-queue) within the view's TurnZone, the
// room is open and the instance holds polls (see MaxTurnWait); otherwise
// AwaitTurn returns e at once. While held, it reads the visitor's exact
// entry when this instance admits it, when the view shows the head past
// its place or the room's state changed, and every forecast.FastPoll (so
// that the store sees the visitor present, as its polls would); it
// returns as soon as the entry no longer waits, the room's state changed,
// another poll of the visitor is held, Run ends, or ctx ends, with the
// last entry read. Errors are the store's.
func (q *Queue) AwaitTurn(ctx context.Context, room, visitor string, seq int64, e Entry, wait time.Duration) (Entry, error) {
	wait = min(wait, MaxTurnWait)
	if wait <= 0 || e.Status != Waiting || e.Position <= 0 {
		return e, nil
	}
	now := q.now()
	v := q.view(room)
	if v == nil || now.Sub(v.At) >= staleAfter || v.EffectiveState() != Open || v.PreQueue(now) || e.Position > v.TurnZone() {
		return e, nil
	}
	h := q.turns.hold(room, visitor, seq)
	if h == nil {
		return e, nil
	}
	defer q.turns.release(room, visitor, h)
	q.metrics.held(room, 1)
	defer q.metrics.held(room, -1)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	presence := time.NewTicker(forecast.FastPoll)
	defer presence.Stop()
	state := v.EffectiveState()
	for {
		select {
		case <-ctx.Done():
			return e, nil
		case <-h.done:
			return e, nil
		case <-deadline.C:
			return e, nil
		case <-h.wake:
		case <-presence.C:
		}
		next, err := q.store.Status(ctx, room, visitor, q.now())
		if err != nil {
			if ctx.Err() != nil { // the client went away
				return e, nil
			}
			return e, err
		}
		q.metrics.polled(room, false)
		e = next
		if e.Status != Waiting || e.Position <= 0 {
			return e, nil
		}
		if v := q.view(room); v != nil && v.EffectiveState() != state {
			return e, nil
		}
	}
}
