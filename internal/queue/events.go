package queue

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"usher/internal/event"
	"usher/internal/hist"
)

// The queue's events (package event), emitted by the wrapper of the
// instance that made the change, after the store did it.
//
// Aggregate: the queue's high-rate facts (new places, admissions, abandons,
// expiries, leaves from the active set, and the times in queue) are counted
// per room in memory, with atomics on the request path (no event, no
// allocation, no channel send per visitor), and one counted event per room
// that moved carries them every Options.CountEvery (RunCounts): the stream
// costs O(rooms busy), not O(visitors). Counts add up, so a counted event
// the emitter refuses (its buffer full: event.Offerer) is not lost: its
// counts stay and go with the next one. DrainCounts sends what is left at
// shutdown (and logs what it could not, with the counts lost). Per visitor: nothing from the queue any more; the low-rate
// events (settings, holds, reservations) are their packages'.
//
// The time in queue of a visitor is measured when a poll first finds it
// admitted (Waited: from its ticket's issue to that poll, on the instance
// that answered it; once per place and instance), or as 0 for a visitor
// admitted at once on entry. Visitors who never poll once admitted are
// admissions without a time in queue.
//
// With no Options.Events nothing is counted and nothing costs more.

// tally is one room's counts since its last counted event.
type tally struct {
	arrivals, admissions, abandons, expired, leftActive atomic.Int64
	// dirty is set by the first count after a flush, which puts the room
	// in counts.dirty (mark): a flush visits only the rooms that moved.
	dirty atomic.Bool
	mu    sync.Mutex // guards the waits
	waits waits
}

// waits are times in queue, added up.
type waits struct {
	n, sumMS, etas, etaErrSumMS, etaAbsErrSumMS int64
	hist                                        hist.Counts
}

func (w *waits) add(o waits) {
	w.n += o.n
	w.sumMS += o.sumMS
	w.etas += o.etas
	w.etaErrSumMS += o.etaErrSumMS
	w.etaAbsErrSumMS += o.etaAbsErrSumMS
	if w.hist == nil && len(o.hist) > 0 {
		w.hist = hist.Counts{}
	}
	w.hist.Merge(o.hist)
}

// counts holds the tallies of the rooms this instance counted in.
type counts struct {
	rooms atomic.Pointer[map[string]*tally] // replaced when a room is added
	mu    sync.Mutex                        // guards adding rooms and dirty
	dirty []string
	// flushMu serializes flushes.
	flushMu sync.Mutex
	seen    seenSet // places whose time in queue was counted (Waited)
}

// tally returns room's tally. A count adds to it first and then calls
// mark: a flush that swapped the counts before the add sees the room
// marked again.
func (q *Queue) tally(room string) *tally {
	c := q.counts
	if t := (*c.rooms.Load())[room]; t != nil {
		return t
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.rooms.Load()
	if t := old[room]; t != nil {
		return t
	}
	rooms := make(map[string]*tally, len(old)+1)
	for k, v := range old {
		rooms[k] = v
	}
	t := &tally{}
	rooms[room] = t
	c.rooms.Store(&rooms)
	return t
}

// mark puts the room in the next flush, after a count.
func (q *Queue) mark(room string, t *tally) {
	if !t.dirty.Load() && t.dirty.CompareAndSwap(false, true) {
		q.counts.mu.Lock()
		q.counts.dirty = append(q.counts.dirty, room)
		q.counts.mu.Unlock()
	}
}

// countEntered counts a new place (and, admitted at once, its admission
// with a time in queue of 0).
func (q *Queue) countEntered(room string, e Entry) {
	t := q.tally(room)
	t.arrivals.Add(1)
	if e.Status == Active {
		t.admissions.Add(1)
		if q.counts.seen.first(seenKey(room, e.Visitor, e.Seq), q.now()) {
			t.waited(0, 0)
		}
	}
	q.mark(room, t)
}

// countStep counts an admission step.
func (q *Queue) countStep(room string, res AdmitResult) {
	if len(res.Admitted) == 0 && res.Expired == 0 && res.Abandoned == 0 {
		return
	}
	t := q.tally(room)
	t.admissions.Add(int64(len(res.Admitted)))
	t.expired.Add(res.Expired)
	t.abandons.Add(res.Abandoned)
	q.mark(room, t)
}

// Waited counts the time in queue of a visitor a poll just found admitted:
// from issued (its ticket's, when it entered) to now, with the error of the
// forecast eta (0: none). Each place (room, visitor, seq) counts once per
// instance (remembered for seenFor, at most seenMax of them). Without
// events it does nothing.
func (q *Queue) Waited(room, visitor string, seq int64, issued time.Time, eta time.Duration) {
	if q.counts == nil {
		return
	}
	now := q.now()
	if !q.counts.seen.first(seenKey(room, visitor, seq), now) {
		return
	}
	t := q.tally(room)
	t.waited(max(now.Sub(issued), 0), eta)
	q.mark(room, t)
}

func seenKey(room, visitor string, seq int64) string {
	return room + "\x00" + visitor + "\x00" + strconv.FormatInt(seq, 10)
}

func (t *tally) waited(wait, eta time.Duration) {
	ms := wait.Milliseconds()
	w := waits{n: 1, sumMS: ms, hist: hist.Counts{hist.Bucket(wait): 1}}
	if eta > 0 {
		diff := ms - eta.Milliseconds()
		w.etas, w.etaErrSumMS, w.etaAbsErrSumMS = 1, diff, max(diff, -diff)
	}
	t.mu.Lock()
	t.waits.add(w)
	t.mu.Unlock()
}

// RunCounts emits the counted events every Options.CountEvery until ctx
// ends, then once more. Without events it returns at once. A server that
// still admits or answers polls after ctx ended calls DrainCounts when it
// is done.
func (q *Queue) RunCounts(ctx context.Context) error {
	if q.counts == nil {
		return nil
	}
	t := time.NewTicker(q.countEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			q.FlushCounts()
			return nil
		case <-t.C:
			q.FlushCounts()
		}
	}
}

// DrainCounts flushes until the emitter took every room's counts, or ctx
// ends: then what is left is logged as lost. A server calls it once its
// requests and admission steps are done, with the emitter still running.
func (q *Queue) DrainCounts(ctx context.Context) {
	for q.FlushCounts() > 0 {
		select {
		case <-ctx.Done():
			q.lostCounts()
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// lostCounts logs and forgets the counts left at shutdown.
func (q *Queue) lostCounts() {
	c := q.counts
	c.mu.Lock()
	dirty := c.dirty
	c.dirty = nil
	c.mu.Unlock()
	rooms := *c.rooms.Load()
	for _, room := range dirty {
		t := rooms[room]
		t.dirty.Store(false)
		q.log.Error("queue counts not published at shutdown: lost from the analytics", "room", room,
			"arrivals", t.arrivals.Swap(0), "admissions", t.admissions.Swap(0), "abandons", t.abandons.Swap(0),
			"expired", t.expired.Swap(0), "left_active", t.leftActive.Swap(0))
	}
}

// FlushCounts emits one counted event for every room whose counts moved
// since the last flush. A room whose event the emitter refuses keeps its
// counts for the next flush: FlushCounts returns how many did.
func (q *Queue) FlushCounts() (kept int) {
	c := q.counts
	if c == nil {
		return 0
	}
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	now := q.now()
	c.mu.Lock()
	dirty := c.dirty
	c.dirty = nil
	c.mu.Unlock()
	rooms := *c.rooms.Load()
	offer, _ := q.events.(event.Offerer)
	for _, room := range dirty {
		t := rooms[room]
		t.dirty.Store(false) // before the swaps: a count after them marks it again
		d := event.Data{
			Arrivals: t.arrivals.Swap(0), Admissions: t.admissions.Swap(0),
			Abandons: t.abandons.Swap(0), Expired: t.expired.Swap(0), LeftActive: t.leftActive.Swap(0),
		}
		t.mu.Lock()
		w := t.waits
		t.waits = waits{}
		t.mu.Unlock()
		d.Waits, d.WaitSumMS, d.WaitHist = w.n, w.sumMS, w.hist
		d.ETAs, d.ETAErrSumMS, d.ETAAbsErrSumMS = w.etas, w.etaErrSumMS, w.etaAbsErrSumMS
		if d.Arrivals == 0 && d.Admissions == 0 && d.Abandons == 0 && d.Expired == 0 && d.LeftActive == 0 && w.n == 0 {
			continue
		}
		e := event.New(event.Counted, room, "", now, d)
		if offer == nil {
			q.events.Emit(e)
			continue
		}
		if offer.Offer(e) {
			continue
		}
		// Refused: the counts go back, for the next flush.
		t.arrivals.Add(d.Arrivals)
		t.admissions.Add(d.Admissions)
		t.abandons.Add(d.Abandons)
		t.expired.Add(d.Expired)
		t.leftActive.Add(d.LeftActive)
		t.mu.Lock()
		t.waits.add(w)
		t.mu.Unlock()
		q.mark(room, t)
		kept++
	}
	return kept
}

// leaveObserved leaves and counts where the visitor left from: it reads the
// entry first (one more store call, only with events on), so a visitor who
// was in neither line nor active set counts nothing.
func (q *Queue) leaveObserved(ctx context.Context, room, visitor string) error {
	e, err := q.store.Status(ctx, room, visitor, q.now())
	if err != nil {
		return err
	}
	if err := q.store.Leave(ctx, room, visitor); err != nil {
		return err
	}
	switch e.Status {
	case Waiting:
		t := q.tally(room)
		t.abandons.Add(1)
		q.mark(room, t)
	case Active:
		t := q.tally(room)
		t.leftActive.Add(1)
		q.mark(room, t)
	}
	return nil
}
