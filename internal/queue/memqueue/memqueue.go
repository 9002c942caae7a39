// Package memqueue is the in-memory queue.Store: the default for a single
// usher instance with nothing installed.
//
// It serves one process only: several instances each get their own rooms, and
// all state is lost on restart (visitors must enter again). Operations on one
// room are serialized by a mutex; rank lookups are O(log n) through a Fenwick
// tree, so a status poll stays cheap with a million visitors waiting, and a
// waiting line holds no Go pointer per visitor, so that a long line costs
// the garbage collector nothing to scan.
package memqueue

import (
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"usher/internal/queue"
)

var _ queue.Store = (*Store)(nil)

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
	active   map[string]time.Time // visitor → expiry
	expiries expiryHeap           // at least one entry per active visitor
	draw     queue.Draw           // Entrants counts pre before the draw
	// pre is the pre-queue before the draw: visitor → queue.DrawKey.
	pre     map[string][32]byte
	control queue.Control // the adaptive controller's state
	signals queue.Signals // its pool since the last step
}

func newRoom(set queue.Settings) *room {
	r := &room{
		active:   make(map[string]time.Time),
		tokens:   float64(set.Batch()),
		waiting:  newFIFO(),
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
	return r, nil
}

// PutRoom implements queue.Store.
func (s *Store) PutRoom(_ context.Context, name string, set queue.Settings) error {
	s.mu.Lock()
	r := s.rooms[name]
	if r == nil {
		r = newRoom(set)
		s.rooms[name] = r
		r.mu.Lock()
		s.mu.Unlock()
		defer r.mu.Unlock()
		return s.save(name, r)
	}
	s.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.settings = set
	r.tokens = math.Min(r.tokens, set.BucketCapacity())
	r.seed()
	return s.save(name, r)
}

// CreateRoom implements queue.Store.
func (s *Store) CreateRoom(_ context.Context, name string, set queue.Settings) (bool, error) {
	s.mu.Lock()
	if s.rooms[name] != nil {
		s.mu.Unlock()
		return false, nil
	}
	r := newRoom(set)
	s.rooms[name] = r
	r.mu.Lock()
	s.mu.Unlock()
	defer r.mu.Unlock()
	return true, s.save(name, r)
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
func (s *Store) Enter(_ context.Context, name, visitor string, now time.Time) (queue.Entry, bool, error) {
	r, err := s.room(name)
	if err != nil {
		return queue.Entry{}, false, err
	}
	defer r.mu.Unlock()
	s.drawIfDue(name, r, now)
	if e, ok := r.entry(visitor, now); ok {
		return e, false, nil
	}
	if r.settings.State.Refuses() {
		return queue.Entry{}, false, fmt.Errorf("memqueue: enter %s: %w", name, queue.ErrRoomClosed)
	}
	if r.draw.PreQueue(r.settings, now) {
		r.pre[visitor] = queue.DrawKey(r.draw.Seed, visitor)
		return queue.Entry{Visitor: visitor, Status: queue.Waiting}, true, nil
	}
	r.seq++
	if r.waiting.len() == 0 && r.settings.State == queue.Open {
		r.expire(now)
		r.refill(now)
		if int64(len(r.active)) < r.settings.MaxActive && r.tokens >= 1 {
			r.tokens--
			r.admitted++
			exp := now.Add(r.settings.ActiveTTL)
			r.activate(visitor, exp)
			return queue.Entry{Visitor: visitor, Status: queue.Active, Seq: r.seq, ExpiresAt: exp}, true, nil
		}
	}
	r.waiting.push(r.seq, visitor)
	return queue.Entry{Visitor: visitor, Status: queue.Waiting, Seq: r.seq, Position: r.waiting.len()}, true, nil
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
	delete(r.active, visitor)
	delete(r.pre, visitor)
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
	res := queue.AdmitResult{Expired: r.expire(now)}
	r.refill(now)
	if r.settings.State != queue.Open || r.draw.PreQueue(r.settings, now) {
		return res, nil
	}
	n := min(r.settings.MaxActive-int64(len(r.active)), int64(r.tokens), r.waiting.len())
	if n <= 0 {
		return res, nil
	}
	r.tokens -= float64(n)
	r.admitted += n
	exp := now.Add(r.settings.ClaimWindow)
	res.Admitted = make([]string, 0, n)
	for range n {
		v := r.waiting.pop()
		r.activate(v, exp)
		res.Admitted = append(res.Admitted, v)
	}
	return res, nil
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
		Waiting:       r.waiting.len() + int64(len(r.pre)),
		AdmittedTotal: r.admitted,
		LastSeq:       r.seq,
		HeadSeq:       r.seq + 1,
		Draw:          r.draw,
		Control:       r.control,
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

// AddSignals implements queue.Store.
func (s *Store) AddSignals(_ context.Context, name string, sig queue.Signals) (queue.Signals, error) {
	r, err := s.room(name)
	if err != nil {
		return queue.Signals{}, err
	}
	defer r.mu.Unlock()
	r.signals.Merge(sig, 1)
	return r.signals, nil
}

// SetControl implements queue.Store.
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
	if seq, pos, ok := r.waiting.rank(visitor); ok {
		return queue.Entry{Visitor: visitor, Status: queue.Waiting, Seq: seq, Position: pos}, true
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
	for _, k := range order {
		r.seq++
		r.waiting.push(r.seq, k.visitor)
	}
	r.draw.Done, r.draw.Entrants, r.pre = true, int64(len(order)), nil
	s.save(name, r) // a failed write is repeated with the next one
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

func (r *room) refill(now time.Time) {
	set := r.settings.Current(r.control) // the adaptive rate, if adaptive
	if now.After(r.refilled) {
		if !r.refilled.IsZero() {
			r.tokens += set.AdmitRate * now.Sub(r.refilled).Seconds()
		}
		r.refilled = now
	}
	r.tokens = math.Min(r.tokens, set.BucketCapacity())
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
