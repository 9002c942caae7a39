// Package memhold is the in-memory hold.Store: the default for a single
// usher instance with nothing installed.
//
// It serves one process only: several instances each keep their own holds
// (two instances could hold the same seat; SQL still sells it once), and all
// holds are lost on restart, which frees every seat and returns every held
// stock unit at once (the stock level set with SetStock is lost too).
//
// Operations on one scope are serialized by the scope's mutex; scopes do not
// contend. Expiry is lazy: every call on a scope first ends the holds whose
// expiry is at or before the call's now, popping them from a min-heap, so a
// call costs O(k log n) for its k seats plus O(log n) per hold that expired
// since the previous call (each hold expires once). Nothing runs in the
// background. A scope's state stays in memory while holds remain; an emptied
// scope costs a few small maps.
package memhold

import (
	"container/heap"
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"time"

	"usher/internal/hold"
)

var _ hold.Store = (*Store)(nil)

// Store is an in-memory hold.Store. The zero value is not usable; call New.
type Store struct {
	mu     sync.RWMutex
	scopes map[string]*scope
}

// New returns an empty store.
func New() *Store { return &Store{scopes: make(map[string]*scope)} }

type scope struct {
	mu       sync.Mutex
	stock    int64             // units available, not counting live holds
	holds    map[string]*entry // id → live hold
	seats    map[string]*entry // seat → the live hold that has it
	seatsOf  map[string]int    // holder → seats under live holds
	unitsOf  map[string]int64  // holder → units under live holds
	expiries entryHeap         // every live hold, earliest expiry first
	lapsed   []hold.Hold       // holds that expired, not yet taken by Lapsed (at most hold.MaxLapsed)
}

// entry is one live hold; index is its place in the scope's heap.
type entry struct {
	h     hold.Hold
	index int
}

// scope returns the named scope locked, creating it when create is set; nil
// (and nothing locked) when it does not exist.
func (s *Store) scope(name string, create bool) *scope {
	s.mu.RLock()
	sc := s.scopes[name]
	s.mu.RUnlock()
	if sc == nil {
		if !create {
			return nil
		}
		s.mu.Lock()
		if sc = s.scopes[name]; sc == nil {
			sc = &scope{
				holds:   make(map[string]*entry),
				seats:   make(map[string]*entry),
				seatsOf: make(map[string]int),
				unitsOf: make(map[string]int64),
			}
			s.scopes[name] = sc
		}
		s.mu.Unlock()
	}
	sc.mu.Lock()
	return sc
}

// HoldSeats implements hold.Store.
func (s *Store) HoldSeats(_ context.Context, name, holder string, seats []string, limit int, ttl time.Duration, now time.Time) (hold.Hold, error) {
	sc := s.scope(name, true)
	defer sc.mu.Unlock()
	sc.expire(now)
	if taken := sc.taken(seats); len(taken) > 0 {
		return hold.Hold{}, fmt.Errorf("memhold: hold seats %s: %w", name, &hold.TakenError{Seats: taken})
	}
	if sc.seatsOf[holder]+len(seats) > limit {
		return hold.Hold{}, fmt.Errorf("memhold: hold seats %s: %s holds %d, wants %d more, limit %d: %w",
			name, holder, sc.seatsOf[holder], len(seats), limit, hold.ErrLimit)
	}
	e := sc.add(hold.Hold{
		ID:        rand.Text(),
		Scope:     name,
		Holder:    holder,
		Seats:     slices.Clone(seats),
		ExpiresAt: now.Add(ttl),
	})
	return e.copy(), nil
}

// taken lists, in order of first appearance, the requested seats that a live
// hold has or that the request names more than once.
func (sc *scope) taken(seats []string) []string {
	var taken []string
	if len(seats) == 1 {
		if sc.seats[seats[0]] != nil {
			taken = append(taken, seats[0])
		}
		return taken
	}
	count := make(map[string]int, len(seats))
	for _, seat := range seats {
		count[seat]++
	}
	for _, seat := range seats {
		n := count[seat]
		if n == 0 { // listed at its first appearance
			continue
		}
		if n > 1 || sc.seats[seat] != nil {
			taken = append(taken, seat)
		}
		count[seat] = 0
	}
	return taken
}

// Get implements hold.Store.
func (s *Store) Get(_ context.Context, name, id string, now time.Time) (hold.Hold, error) {
	sc := s.scope(name, false)
	if sc == nil {
		return hold.Hold{}, notFound("get", name, id)
	}
	defer sc.mu.Unlock()
	sc.expire(now)
	e := sc.holds[id]
	if e == nil {
		return hold.Hold{}, notFound("get", name, id)
	}
	return e.copy(), nil
}

// Find implements hold.Store.
func (s *Store) Find(_ context.Context, name, seat string, now time.Time) (hold.Hold, error) {
	sc := s.scope(name, false)
	if sc == nil {
		return hold.Hold{}, notFound("find", name, seat)
	}
	defer sc.mu.Unlock()
	sc.expire(now)
	e := sc.seats[seat]
	if e == nil {
		return hold.Hold{}, notFound("find", name, seat)
	}
	return e.copy(), nil
}

// Release implements hold.Store.
func (s *Store) Release(_ context.Context, name, id string, now time.Time) error {
	return s.end("release", name, id, now, true)
}

// Consume implements hold.Store.
func (s *Store) Consume(_ context.Context, name, id string, now time.Time) error {
	return s.end("consume", name, id, now, false)
}

func (s *Store) end(op, name, id string, now time.Time, giveBack bool) error {
	sc := s.scope(name, false)
	if sc == nil {
		return notFound(op, name, id)
	}
	defer sc.mu.Unlock()
	sc.expire(now)
	e := sc.holds[id]
	if e == nil {
		return notFound(op, name, id)
	}
	heap.Remove(&sc.expiries, e.index)
	sc.remove(e, giveBack)
	return nil
}

// HeldSeats implements hold.Store.
func (s *Store) HeldSeats(_ context.Context, name string, now time.Time) ([]string, error) {
	sc := s.scope(name, false)
	if sc == nil {
		return nil, nil
	}
	defer sc.mu.Unlock()
	sc.expire(now)
	seats := make([]string, 0, len(sc.seats))
	for seat := range sc.seats {
		seats = append(seats, seat)
	}
	return seats, nil
}

// SetStock implements hold.Store.
func (s *Store) SetStock(_ context.Context, name string, total int64) error {
	sc := s.scope(name, true)
	defer sc.mu.Unlock()
	sc.stock = total
	return nil
}

// HoldStock implements hold.Store.
func (s *Store) HoldStock(_ context.Context, name, holder string, n, limit int64, ttl time.Duration, now time.Time) (hold.Hold, error) {
	sc := s.scope(name, true)
	defer sc.mu.Unlock()
	sc.expire(now)
	if sc.stock < n {
		return hold.Hold{}, fmt.Errorf("memhold: hold stock %s: %d left, %d wanted: %w", name, sc.stock, n, hold.ErrSoldOut)
	}
	if sc.unitsOf[holder]+n > limit {
		return hold.Hold{}, fmt.Errorf("memhold: hold stock %s: %s holds %d, wants %d more, limit %d: %w",
			name, holder, sc.unitsOf[holder], n, limit, hold.ErrLimit)
	}
	e := sc.add(hold.Hold{
		ID:        rand.Text(),
		Scope:     name,
		Holder:    holder,
		Quantity:  n,
		ExpiresAt: now.Add(ttl),
	})
	return e.copy(), nil
}

// Stock implements hold.Store.
func (s *Store) Stock(_ context.Context, name string, now time.Time) (int64, error) {
	sc := s.scope(name, false)
	if sc == nil {
		return 0, nil
	}
	defer sc.mu.Unlock()
	sc.expire(now)
	return sc.stock, nil
}

func notFound(op, name, id string) error {
	return fmt.Errorf("memhold: %s %s/%s: %w", op, name, id, hold.ErrNotFound)
}

// add records a new live hold, taking its seats or units.
func (sc *scope) add(h hold.Hold) *entry {
	e := &entry{h: h}
	sc.holds[h.ID] = e
	for _, seat := range h.Seats {
		sc.seats[seat] = e
	}
	if len(h.Seats) > 0 {
		sc.seatsOf[h.Holder] += len(h.Seats)
	}
	if h.Quantity > 0 {
		sc.stock -= h.Quantity
		sc.unitsOf[h.Holder] += h.Quantity
	}
	heap.Push(&sc.expiries, e)
	return e
}

// remove forgets a hold already taken off the heap: its seats become free,
// and its units come back to the stock when giveBack is set.
func (sc *scope) remove(e *entry, giveBack bool) {
	h := e.h
	delete(sc.holds, h.ID)
	for _, seat := range h.Seats {
		delete(sc.seats, seat)
	}
	if len(h.Seats) > 0 {
		if sc.seatsOf[h.Holder] -= len(h.Seats); sc.seatsOf[h.Holder] <= 0 {
			delete(sc.seatsOf, h.Holder)
		}
	}
	if h.Quantity > 0 {
		if sc.unitsOf[h.Holder] -= h.Quantity; sc.unitsOf[h.Holder] <= 0 {
			delete(sc.unitsOf, h.Holder)
		}
		if giveBack {
			sc.stock += h.Quantity
		}
	}
}

// expire ends every hold whose expiry is at or before now; their units come
// back.
func (sc *scope) expire(now time.Time) {
	for len(sc.expiries) > 0 && !sc.expiries[0].h.ExpiresAt.After(now) {
		e := heap.Pop(&sc.expiries).(*entry)
		sc.lapsed = append(sc.lapsed, e.copy())
		sc.remove(e, true)
	}
	if n := len(sc.lapsed) - hold.MaxLapsed; n > 0 {
		sc.lapsed = slices.Delete(sc.lapsed, 0, n)
	}
}

// Lapsed implements hold.Store.
func (s *Store) Lapsed(_ context.Context, name string, now time.Time, max int) ([]hold.Hold, error) {
	sc := s.scope(name, false)
	if sc == nil {
		return nil, nil
	}
	defer sc.mu.Unlock()
	sc.expire(now)
	n := min(max, len(sc.lapsed))
	if n <= 0 {
		return nil, nil
	}
	out := slices.Clone(sc.lapsed[:n])
	sc.lapsed = slices.Delete(sc.lapsed, 0, n)
	return out, nil
}

// copy returns the hold with its own seat slice, so that callers cannot
// change the store's.
func (e *entry) copy() hold.Hold {
	h := e.h
	h.Seats = slices.Clone(h.Seats)
	return h
}

// entryHeap orders live holds by expiry and keeps each entry's index, so
// that Release and Consume remove a hold in O(log n).
type entryHeap []*entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].h.ExpiresAt.Before(h[j].h.ExpiresAt) }
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *entryHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}
