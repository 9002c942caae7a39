// Package memqueue is the in-memory queue.Store: the default for a single
// usher instance with nothing installed.
//
// It serves one process: several instances each get their own rooms. A store
// made by Open keeps its rooms, settings and opening draws in a file
// (`<data-dir>/rooms.json` for `usher serve`); the queues, active visitors,
// counters, inventory and controller state are lost on restart. A store made
// by New keeps nothing. Operations on one room are serialized by a mutex;
// rank lookups are O(log n) (a Fenwick tree), and a line holds no Go pointer
// per visitor, so a million waiting cost the garbage collector nothing to
// scan. It refuses rooms of several shards: one process keeps one line.
// docs/architecture.md#memqueue.
package memqueue

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"usher/internal/queue"
)

var (
	_ queue.Store        = (*Store)(nil)
	_ queue.ControlStore = (*Store)(nil)
)

// Store is an in-memory queue.Store. The zero value is not usable; call New
// or Open.
type Store struct {
	mu    sync.RWMutex
	rooms map[string]*room
	disk  *roomFile // nil: nothing survives a restart
}

// New returns an empty store that keeps nothing on disk.
func New() *Store { return &Store{rooms: make(map[string]*room)} }

type room struct {
	mu       sync.Mutex
	settings queue.Settings
	seq      int64
	admitted int64
	tokens   float64
	refilled time.Time // when tokens were last refilled
	waiting  fifo
	// lane is the priority lane (queue/lane.go), numbered by laneSeq;
	// laneCredit is the fraction of a lane admission carried between
	// steps (queue.LaneSplit); codes counts each lane code's places
	// until it expires.
	lane       fifo
	laneSeq    int64
	laneCredit float64
	codes      map[string]laneUses

	active   map[string]time.Time // visitor → expiry
	expiries expiryHeap           // at least one entry per active visitor
	draw     queue.Draw           // Entrants counts pre before the draw
	window   queue.DrawnWindow    // a random room's current draw window
	// pre is the pre-queue before the draw: visitor → queue.DrawKey.
	pre     map[string][32]byte
	control queue.Control // the adaptive controller's state
	signals queue.Signals // its pool since the last step
	// Presence (queue.Settings.PresenceTimeout): seen is when each watched
	// waiting visitor (near the front, or parked) was last seen; zoneSeq
	// the last sequence number marked near. unpolled holds the watched
	// visitors marked while the room admitted nobody, or drawn, or behind
	// another unpolled one, and not seen by a poll since (seen is when
	// they were marked): they are not admitted until they poll;
	// unpolledSeq is the last seq so marked.
	// parked holds the absent taken out of the
	// line (visitor → seq), back those of them who came back, in seq
	// order: the next step admits them first. drawn is the range of seqs
	// the opening draw gave (drawn[0] > drawn[1]: none).
	seen        map[string]time.Time
	zoneSeq     int64
	unpolled    map[string]bool
	unpolledSeq int64
	parked      map[string]int64
	back        []parkedVisitor
	drawn       [2]int64
	// since is when this process began keeping the queue of a room read
	// from the rooms file (queue.Stats.Since); unsaved marks a draw that
	// the rooms file does not have yet.
	since   time.Time
	unsaved bool
	// inventory is the sale's units left (SetInventory); not kept on
	// disk: the sale service sets it again within seconds of a restart.
	inventory queue.Inventory
	// deleted marks a room DeleteRoom removed, for callers that found it
	// just before.
	deleted bool
}

// laneUses is how many places a lane code made, kept until it expires.
type laneUses struct {
	n   int64
	exp time.Time
}

type parkedVisitor struct {
	seq     int64
	visitor string
}

func newRoom(set queue.Settings) *room {
	r := &room{
		active:   make(map[string]time.Time),
		seen:     make(map[string]time.Time),
		unpolled: make(map[string]bool),
		parked:   make(map[string]int64),
		drawn:    [2]int64{1, 0},
		tokens:   float64(set.Batch()),
		waiting:  newFIFO(),
		lane:     newFIFO(),
		codes:    make(map[string]laneUses),
		settings: set,
	}
	r.seed()
	return r
}

// seed gives the room its draw seed when its settings first have OpensAt.
func (r *room) seed() {
	if r.draw.Seed == nil && !r.settings.OpensAt.IsZero() {
		r.draw.Seed = queue.NewSeed()
		r.pre = make(map[string][32]byte)
	}
}

func (s *Store) room(name string) (*room, error) {
	s.mu.RLock()
	r := s.rooms[name]
	s.mu.RUnlock()
	if r == nil {
		return nil, fmt.Errorf("memqueue: room %s: %w", name, queue.ErrRoomNotFound)
	}
	r.mu.Lock()
	if r.deleted {
		r.mu.Unlock()
		return nil, fmt.Errorf("memqueue: room %s: %w", name, queue.ErrRoomNotFound)
	}
	return r, nil
}

// errSharded: one process keeps one line per room.
var errSharded = queue.ErrInvalid.Detail("shards: this store keeps one line per room; a room of several shards needs a clustered queue store")

// PutRoom implements queue.Store.
func (s *Store) PutRoom(ctx context.Context, name string, set queue.Settings, o queue.PutOptions) (bool, error) {
	if set.Sharded() {
		return false, fmt.Errorf("memqueue: put room %s: %w", name, errSharded)
	}
	s.mu.Lock()
	r := s.rooms[name]
	if r == nil {
		r = newRoom(set)
		if err := s.save(name, r); err != nil { // nothing was created
			s.mu.Unlock()
			return false, err
		}
		s.rooms[name] = r
		s.mu.Unlock()
		return true, nil
	}
	s.mu.Unlock()
	if o.OnlyCreate {
		return false, nil
	}
	r.mu.Lock()
	if r.deleted { // deleted since: create it afresh
		r.mu.Unlock()
		return s.PutRoom(ctx, name, set, o)
	}
	defer r.mu.Unlock()
	if r.draw.Done && !set.OpensAt.Equal(r.settings.OpensAt) {
		return false, fmt.Errorf("memqueue: put room %s: %w", name, queue.ErrDrawn)
	}
	old, oldTokens, oldDraw, oldPre, oldControl := r.settings, r.tokens, r.draw, r.pre, r.control
	if set.Admission == queue.Adaptive && old.Admission != queue.Adaptive && r.control.Version > 0 {
		r.control = queue.Control{Version: r.control.Version + 1} // afresh
	}
	r.settings = set
	r.tokens = math.Min(r.tokens, r.limits().BucketCapacity())
	r.seed()
	if err := s.save(name, r); err != nil { // nothing changes
		r.settings, r.tokens, r.draw, r.pre, r.control = old, oldTokens, oldDraw, oldPre, oldControl
		return false, err
	}
	return false, nil
}

// Rooms implements queue.Store.
func (s *Store) Rooms(context.Context) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, len(s.rooms))
	for name := range s.rooms {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// Enter implements queue.Store.
func (s *Store) Enter(_ context.Context, name, visitor string, now time.Time, o queue.EnterOptions) (queue.Entry, bool, error) {
	return s.enter(name, visitor, o.Lane, now)
}

// enterLane makes a new place in the priority lane (or a passthrough)
// with a lane code, counting its use; the caller found no entry.
func (r *room) enterLane(name, visitor string, code queue.LaneCode, full bool, now time.Time) (queue.Entry, bool, error) {
	switch used := r.codes[code.ID]; {
	case r.settings.PriorityShare == 0:
		return queue.Entry{}, false, fmt.Errorf("memqueue: enter lane %s: %w", name, queue.ErrLanesOff)
	case full:
		return queue.Entry{}, false, fmt.Errorf("memqueue: enter lane %s: %w", name, queue.ErrQueueFull)
	case used.n >= code.Uses && now.Before(used.exp):
		return queue.Entry{}, false, fmt.Errorf("memqueue: enter lane %s: %w", name, queue.ErrLaneCodeUsed)
	case !now.Before(used.exp):
		used = laneUses{exp: code.ExpiresAt}
		r.pruneCodes(now)
		fallthrough
	default:
		r.codes[code.ID] = laneUses{n: used.n + 1, exp: used.exp}
	}
	if r.waitingLen() == 0 && r.settings.State == queue.Open && !r.draw.PreQueue(r.settings, now) {
		r.expire(now)
		if r.refill(now).Cap > int64(len(r.active)) && r.tokens >= 1 {
			r.tokens--
			r.admitted++
			exp := now.Add(r.settings.ActiveTTL)
			r.activate(visitor, exp)
			return queue.Entry{Visitor: visitor, Status: queue.Active, ExpiresAt: exp}, true, nil
		}
	}
	r.laneSeq++
	r.lane.push(r.laneSeq, visitor)
	return queue.Entry{Visitor: visitor, Status: queue.Waiting, Position: r.lane.len()}, true, nil
}

// pruneCodes forgets the use counts of expired lane codes once they are
// many.
func (r *room) pruneCodes(now time.Time) {
	if len(r.codes) < 1024 {
		return
	}
	for id, u := range r.codes {
		if !now.Before(u.exp) {
			delete(r.codes, id)
		}
	}
}

func (s *Store) enter(name, visitor string, lane *queue.LaneCode, now time.Time) (queue.Entry, bool, error) {
	r, err := s.room(name)
	if err != nil {
		return queue.Entry{}, false, err
	}
	defer r.mu.Unlock()
	s.drawIfDue(name, r, now)
	if e, ok := r.entry(visitor, now); ok {
		r.saw(visitor, now)
		return e, false, nil
	}
	if r.state().Refuses() || !r.settings.TakesNewcomers() {
		return queue.Entry{}, false, fmt.Errorf("memqueue: enter %s: %w", name, queue.ErrRoomClosed)
	}
	full := r.settings.MaxWaiting > 0 && r.waitingLen() >= r.settings.MaxWaiting
	if lane != nil {
		return r.enterLane(name, visitor, *lane, full, now)
	}
	if r.draw.PreQueue(r.settings, now) {
		if full {
			return queue.Entry{}, false, fmt.Errorf("memqueue: enter %s: %w", name, queue.ErrQueueFull)
		}
		r.pre[visitor] = queue.DrawKey(r.draw.Seed, visitor)
		return queue.Entry{Visitor: visitor, Status: queue.Waiting}, true, nil
	}
	if full { // a full line is not empty: no passthrough either
		return queue.Entry{}, false, fmt.Errorf("memqueue: enter %s: %w", name, queue.ErrQueueFull)
	}
	r.seq++
	if r.waitingLen() == 0 && r.settings.State == queue.Open {
		r.expire(now)
		if r.refill(now).Cap > int64(len(r.active)) && r.tokens >= 1 {
			r.tokens--
			r.admitted++
			exp := now.Add(r.settings.ActiveTTL)
			r.activate(visitor, exp)
			return queue.Entry{Visitor: visitor, Status: queue.Active, Seq: r.seq, ExpiresAt: exp}, true, nil
		}
	}
	r.waiting.push(r.seq, visitor)
	e := queue.Entry{Visitor: visitor, Status: queue.Waiting, Seq: r.seq, Position: r.waitingLen()}
	if r.settings.Queueing == queue.QueueRandom {
		e.Seq, e.Position = r.drawIn(now, e.Position, rand.Float64())
	}
	return e, true, nil
}

// drawIn gives the newcomer just queued at the end of a random room's line,
// at position, its drawn place among its window's entrants behind the near
// zone (queue.DrawSlot with u), and returns its seq and position.
func (r *room) drawIn(now time.Time, position int64, u float64) (int64, int64) {
	if i, _ := queue.DrawWindow(now, r.settings.DrawWindow); r.window.Index != i {
		r.window = queue.DrawnWindow{Index: i, Seq: r.seq}
	}
	others := r.waiting.len() - 1
	n := min(r.waiting.from(r.window.Seq)-1, others-r.limits().Near)
	k := queue.DrawSlot(n, u)
	if k >= n {
		return r.seq, position
	}
	return r.waiting.swapLast(others - n + k), position - (n - k)
}

// Status implements queue.Store.
func (s *Store) Status(_ context.Context, name, visitor string, now time.Time) (queue.Entry, error) {
	r, err := s.room(name)
	if err != nil {
		return queue.Entry{}, err
	}
	defer r.mu.Unlock()
	s.drawIfDue(name, r, now)
	e, ok := r.entry(visitor, now)
	if !ok {
		return queue.Entry{Visitor: visitor, Status: queue.Gone}, nil
	}
	if e.Status == queue.Active {
		if renewed := now.Add(r.settings.ActiveTTL); renewed.After(e.ExpiresAt) {
			r.active[visitor] = renewed
			e.ExpiresAt = renewed
		}
	}
	r.saw(visitor, now)
	return e, nil
}

// Leave implements queue.Store.
func (s *Store) Leave(_ context.Context, name, visitor string) error {
	r, err := s.room(name)
	if err != nil {
		return err
	}
	defer r.mu.Unlock()
	r.waiting.remove(visitor)
	r.lane.remove(visitor)
	delete(r.active, visitor)
	delete(r.pre, visitor)
	delete(r.seen, visitor)
	delete(r.unpolled, visitor)
	delete(r.parked, visitor)
	r.back = slices.DeleteFunc(r.back, func(p parkedVisitor) bool { return p.visitor == visitor })
	return nil
}

// Admit implements queue.Store.
func (s *Store) Admit(_ context.Context, name string, now time.Time) (queue.AdmitResult, error) {
	r, err := s.room(name)
	if err != nil {
		return queue.AdmitResult{}, err
	}
	defer r.mu.Unlock()
	s.drawIfDue(name, r, now)
	if r.unsaved && s.save(name, r) == nil {
		r.unsaved = false
	}
	lim := r.refill(now)
	res := queue.AdmitResult{Expired: r.expire(now), Abandoned: r.unpark(now, lim.Grace)}
	admits := r.settings.State == queue.Open && !r.draw.PreQueue(r.settings, now)
	if lim.Presence > 0 {
		r.mark(now, lim.Near, !admits)
	}
	if !admits {
		return res, nil
	}
	total := min(lim.Cap-int64(len(r.active)), int64(r.tokens), r.waitingLen())
	if total <= 0 {
		return res, nil
	}
	// The priority lane's part (queue.LaneSplit), then the main line's,
	// then the lane takes what the main line left.
	laneN, credit := queue.LaneSplit(r.settings.PriorityShare, total, r.laneCredit)
	r.laneCredit = credit
	laneN = min(laneN, r.lane.len())
	n := min(total-laneN, r.waiting.len()+int64(len(r.back)))
	var admit []string
	for len(r.back) > 0 && int64(len(admit)) < n { // the absent who came back go first
		admit = append(admit, r.back[0].visitor)
		r.forget(r.back[0].visitor)
		r.back = r.back[1:]
	}
	switch left := n - int64(len(admit)); {
	case left <= 0: // the returned (or the lane) filled the step
	case lim.Presence > 0:
		admit = append(admit, r.present(now, lim.Presence, left, &res)...)
	default:
		for range left {
			v := r.waiting.pop()
			r.forget(v)
			admit = append(admit, v)
		}
	}
	laneN = min(r.lane.len(), total-int64(len(admit)))
	for range laneN {
		admit = append(admit, r.lane.pop())
	}
	n = int64(len(admit))
	r.tokens -= float64(n)
	r.admitted += n
	exp := now.Add(r.settings.ClaimWindow)
	for _, v := range admit {
		r.activate(v, exp)
	}
	res.Admitted = admit
	return res, nil
}

// waitingLen counts the line: waiting, pre-queue and parked visitors who
// came back.
func (r *room) waitingLen() int64 {
	return r.waiting.len() + r.lane.len() + int64(len(r.pre)) + int64(len(r.back))
}

// unpark removes the parked visitors absent past the grace and returns
// how many.
func (r *room) unpark(now time.Time, grace time.Duration) int64 {
	var n int64
	for v := range r.parked {
		if now.Sub(r.seen[v]) >= grace {
			delete(r.parked, v)
			r.forget(v)
			n++
		}
	}
	return n
}

// mark marks the visitors who came near the front (Settings.Near) since
// the last step as seen now: presence is measured from when their polls
// started to reach the store. Those marked while the room admits nobody
// (idle: paused, closed, before its draw), the drawn entrants, and every
// visitor marked while an unpolled one is still in line are marked
// unpolled: a step admits them only once a poll has seen them, so that a
// visitor who left before the opening is not admitted at it, and those
// behind it never wait on it (present).
func (r *room) mark(now time.Time, near int64, idle bool) {
	r.waiting.scan(func(_ int, seq int64, id []byte) bool {
		if near--; near < 0 {
			return false
		}
		if seq > r.zoneSeq {
			r.seen[string(id)] = now
			if idle || seq >= r.drawn[0] && seq <= r.drawn[1] || len(r.unpolled) > 0 {
				r.unpolled[string(id)] = true
				r.unpolledSeq = seq
			}
			r.zoneSeq = seq
		}
		return true
	})
}

// present takes up to n visitors from the head of the line who are not
// absent. The absent are parked: taken out of the line, so that the head
// and the positions behind them stay what admission will do (counted in
// res.Skipped); at their next poll they come back (entry) and the next
// step admits them first. Unpolled visitors not yet absent keep their
// place and are passed over; past one of them the walk stops at the first
// visitor marked after the last unpolled one (a visitor beyond the watched
// zone), so that nobody a poll has not shown there is admitted ahead of
// them.
func (r *room) present(now time.Time, presence time.Duration, n int64, res *queue.AdmitResult) []string {
	type place struct {
		i   int // in the line
		seq int64
	}
	var admit []int
	var park []place
	passed := false // over an unpolled visitor
	r.waiting.scan(func(i int, seq int64, id []byte) bool {
		seen, watched := r.seen[string(id)]
		switch {
		case watched && now.Sub(seen) >= presence:
			park = append(park, place{i, seq})
		case r.unpolled[string(id)]:
			passed = true
		case passed && seq > r.unpolledSeq:
			return false
		default:
			admit = append(admit, i)
		}
		return int64(len(admit)) < n
	})
	out := make([]string, len(admit))
	for j, i := range admit {
		out[j] = r.waiting.take(i)
		r.forget(out[j])
	}
	for _, p := range park {
		v := r.waiting.take(p.i)
		r.parked[v] = p.seq
		delete(r.unpolled, v) // its seen is when it was marked
	}
	res.Skipped = int64(len(park))
	r.waiting.tidy()
	return out
}

// forget drops what presence keeps of a visitor leaving the line.
func (r *room) forget(visitor string) {
	delete(r.seen, visitor)
	delete(r.unpolled, visitor)
}

// Stats implements queue.Store.
func (s *Store) Stats(_ context.Context, name string, now time.Time) (queue.Stats, error) {
	r, err := s.room(name)
	if err != nil {
		return queue.Stats{}, err
	}
	defer r.mu.Unlock()
	st := queue.Stats{
		Settings:      r.settings,
		Waiting:       r.waitingLen(),
		Lane:          r.lane.len(),
		AdmittedTotal: r.admitted,
		LastSeq:       r.seq,
		HeadSeq:       r.seq + 1,
		Draw:          r.draw,
		Since:         r.since,
		Inventory:     r.inventory,
		Control:       r.control,
		Window:        r.window,
	}
	if !r.draw.Done {
		st.Draw.Entrants = int64(len(r.pre))
	}
	if seq, ok := r.waiting.headSeq(); ok {
		st.HeadSeq = seq
	}
	for _, exp := range r.active {
		if exp.After(now) {
			st.Active++
		}
	}
	return st, nil
}

// SetInventory implements queue.Store.
func (s *Store) SetInventory(_ context.Context, name string, units int64) error {
	r, err := s.room(name)
	if err != nil {
		return err
	}
	defer r.mu.Unlock()
	r.inventory = queue.Inventory{Units: units, Known: true}
	return nil
}

// state is the room's queue.Stats.EffectiveState.
func (r *room) state() queue.RoomState {
	return queue.Stats{Settings: r.settings, Inventory: r.inventory}.EffectiveState()
}

// AddSignals implements queue.ControlStore.
func (s *Store) AddSignals(_ context.Context, name string, sig queue.Signals) (queue.Signals, error) {
	r, err := s.room(name)
	if err != nil {
		return queue.Signals{}, err
	}
	defer r.mu.Unlock()
	r.signals.Merge(sig, 1)
	return r.signals, nil
}

// SetControl implements queue.ControlStore.
func (s *Store) SetControl(_ context.Context, name string, next queue.Control, used queue.Signals) (bool, error) {
	r, err := s.room(name)
	if err != nil {
		return false, err
	}
	defer r.mu.Unlock()
	if r.control.Version != next.Version-1 {
		return false, nil
	}
	r.control = next
	r.signals.Merge(used, -1)
	return true, nil
}

// entry returns the visitor's live entry. An active visitor whose expiry has
// passed counts as gone (the next admission step removes it).
func (r *room) entry(visitor string, now time.Time) (queue.Entry, bool) {
	if exp, ok := r.active[visitor]; ok {
		if exp.After(now) {
			return queue.Entry{Visitor: visitor, Status: queue.Active, ExpiresAt: exp}, true
		}
		delete(r.active, visitor)
	}
	if _, pos, ok := r.lane.rank(visitor); ok { // a lane place: Seq 0
		return queue.Entry{Visitor: visitor, Status: queue.Waiting, Position: pos}, true
	}
	if seq, pos, ok := r.waiting.rank(visitor); ok {
		return queue.Entry{Visitor: visitor, Status: queue.Waiting, Seq: seq, Position: pos + int64(len(r.back))}, true
	}
	if seq, ok := r.parked[visitor]; ok { // it came back: next in line
		delete(r.parked, visitor)
		i, _ := slices.BinarySearchFunc(r.back, seq, func(p parkedVisitor, seq int64) int { return cmp.Compare(p.seq, seq) })
		r.back = slices.Insert(r.back, i, parkedVisitor{seq, visitor})
	}
	for i, p := range r.back {
		if p.visitor == visitor {
			return queue.Entry{Visitor: visitor, Status: queue.Waiting, Seq: p.seq, Position: int64(i + 1)}, true
		}
	}
	if _, ok := r.pre[visitor]; ok {
		return queue.Entry{Visitor: visitor, Status: queue.Waiting}, true
	}
	return queue.Entry{}, false
}

// drawIfDue runs the room's opening draw when it is due (queue.Draw.Due):
// the pre-queue joins the line in draw order behind those waiting, with the
// next sequence numbers. It sorts the whole pre-queue under the room's
// lock, about a second for a million entrants.
func (s *Store) drawIfDue(name string, r *room, now time.Time) {
	if !r.draw.Due(r.settings, now) {
		return
	}
	type keyed struct {
		key     [32]byte
		visitor string
	}
	order := make([]keyed, 0, len(r.pre))
	for v, k := range r.pre {
		order = append(order, keyed{k, v})
	}
	slices.SortFunc(order, func(a, b keyed) int { return bytes.Compare(a.key[:], b.key[:]) })
	r.drawn = [2]int64{r.seq + 1, r.seq + int64(len(order))}
	for _, k := range order {
		r.seq++
		r.waiting.push(r.seq, k.visitor)
	}
	r.draw.Done, r.draw.Entrants, r.pre = true, int64(len(order)), nil
	// The draw stands (it is due, and entrants may already have seen
	// their places); a failed write is repeated by the admission steps.
	r.unsaved = s.save(name, r) != nil
}

// saw records that a waiting visitor near the front was seen at now.
func (r *room) saw(visitor string, now time.Time) {
	if _, near := r.seen[visitor]; near {
		r.seen[visitor] = now
		delete(r.unpolled, visitor)
	}
}

func (r *room) activate(visitor string, exp time.Time) {
	r.active[visitor] = exp
	heap.Push(&r.expiries, expiry{at: exp, visitor: visitor})
}

// expire removes active visitors whose expiry is at or before now and
// returns how many it removed.
func (r *room) expire(now time.Time) int64 {
	var n int64
	for len(r.expiries) > 0 && !r.expiries[0].at.After(now) {
		top := &r.expiries[0]
		cur, ok := r.active[top.visitor]
		switch {
		case !ok: // left
			heap.Pop(&r.expiries)
		case !cur.After(now):
			delete(r.active, top.visitor)
			heap.Pop(&r.expiries)
			n++
		default: // renewed since it was pushed
			top.at = cur
			heap.Fix(&r.expiries, 0)
		}
	}
	return n
}

// limits are the room's queue.Limits now.
func (r *room) limits() queue.Limits { return r.settings.Limits(r.control, r.inventory) }

// refill refills the token bucket at now and returns the limits it
// followed.
func (r *room) refill(now time.Time) queue.Limits {
	lim := r.limits()
	if now.After(r.refilled) {
		if !r.refilled.IsZero() {
			r.tokens += lim.Rate * now.Sub(r.refilled).Seconds()
		}
		r.refilled = now
	}
	r.tokens = math.Min(r.tokens, lim.BucketCapacity())
	return lim
}

type expiry struct {
	at      time.Time
	visitor string
}

type expiryHeap []expiry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// DeleteRoom implements queue.Store. The store's lock is held throughout,
// so no Enter slips in between the check and the removal.
func (s *Store) DeleteRoom(_ context.Context, name string, force bool, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rooms[name]
	if r == nil {
		return fmt.Errorf("memqueue: delete room %s: %w", name, queue.ErrRoomNotFound)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !force && (r.waitingLen()+int64(len(r.parked)) > 0 || r.activeAt(now) > 0) {
		return fmt.Errorf("memqueue: delete room %s: %w", name, queue.ErrRoomInUse)
	}
	if err := s.unsave(name); err != nil { // nothing was deleted
		return err
	}
	delete(s.rooms, name)
	r.deleted = true
	return nil
}

// activeAt counts the active visitors whose expiry is after now.
func (r *room) activeAt(now time.Time) int64 {
	var n int64
	for _, exp := range r.active {
		if exp.After(now) {
			n++
		}
	}
	return n
}
