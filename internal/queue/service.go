package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"usher/internal/event"
	"usher/internal/fault"
	"usher/internal/queue/forecast"
)

// ErrNotAdmitted is returned by Renew for a visitor without an active slot.
var ErrNotAdmitted = fault.New(fault.NotAdmitted, "visitor not admitted")

// Options configure a Queue. Zero values take the defaults noted.
type Options struct {
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Refresh is how often Run re-reads the stats of a room someone waits
	// in (default 100ms); IdleRefresh how often it re-reads a room nobody
	// waits in (DefaultIdleRefresh), sooner when a visitor comes to wait
	// in it through this instance (Enter, Status), or its settings or
	// inventory change (here, or anywhere with a Waker store).
	Refresh, IdleRefresh time.Duration
	// Metrics records counters; nil records nothing.
	Metrics *Metrics
	Logger  *slog.Logger
	// StoreTimeout is the deadline of each store call, request paths, the
	// admission step and the view refresh alike (WithTimeout; 0: only the
	// caller's context; usher sets DefaultStoreTimeout). A call that misses
	// it fails with ErrUnavailable, so that a hung store answers 503 (or
	// lets the gate fail open) instead of stalling requests. Backends must
	// honour ctx.
	StoreTimeout time.Duration
	// Events receives the queue's events (events.go); nil emits none.
	Events event.Emitter
	// CountEvery is how often RunCounts emits the rooms' counted events
	// (default DefaultCountEvery).
	CountEvery time.Duration
	// MaxHeld bounds the status polls the instance holds at once
	// (AwaitTurn; default DefaultMaxHeld).
	MaxHeld int
}

// DefaultCountEvery is Options.CountEvery's default: the analytics count
// by the minute, and a second's counts per busy room cost the stream
// nothing next to one event per visitor.
const DefaultCountEvery = time.Second

// DefaultStoreTimeout is usher's --store-timeout: four orders of magnitude
// above the time Redis takes to run one of usher's scripts (tens of µs,
// docs/benchmarks.md#store-operations-go-benchmarks), so a slow moment is
// not an outage, and below the shortest poll interval (1.5 s less 20 %
// jitter: 1.2 s), so a poll that times out still answers before the next
// one is due
// (docs/operations.md#store-deadlines).
const DefaultStoreTimeout = 500 * time.Millisecond

// DefaultIdleRefresh is Options.IdleRefresh's default: a room nobody waits
// in costs an instance one stats read per 30 s. Its settings and state
// reach every view at once (the store's wakes), the instance a visitor
// comes to wait through re-reads it at its next refresh and admits, and
// only its counts (active, admitted) lag in other instances' views.
const DefaultIdleRefresh = 30 * time.Second

// viewSlot holds a room's current view: a refresh replaces the view in
// its slot, so that it costs the rooms it read, not the rooms held.
type viewSlot struct{ v atomic.Pointer[View] }

// Queue wraps a Store with validation, the clock, metrics, and an in-memory
// view of every room that Run refreshes, so that a status poll far from the
// front of the queue costs no store round trip.
type Queue struct {
	store Store
	raw   Store // store without the deadlines (its optional interfaces)
	// control is the store's ControlStore, under the deadlines; nil when
	// it keeps no controller state (adaptive rooms are refused).
	control ControlStore
	now     func() time.Time
	refresh time.Duration
	// idleRefresh is Options.IdleRefresh; woken holds the rooms to re-read
	// at the next refresh however recently they were (Enter).
	idleRefresh time.Duration
	woken       sync.Map
	lastList    time.Time   // when refreshAll last read the store's room list (Run's goroutine only)
	relist      atomic.Bool // the wake feed broke: list at the next refresh
	busy        sync.Map    // room → chan struct{}, closed when its view shows someone waiting (Busy)
	metrics     *Metrics
	log         *slog.Logger
	views       atomic.Pointer[map[string]*viewSlot] // replaced only when the set of rooms changes
	seen        seenSet                              // places whose admission was observed (eta.go)
	mu          sync.Mutex                           // serializes refreshes; guards changed and due
	due         dueRooms                             // when each view is read again (refreshAll)
	// changed, once ViewRooms made it, is closed and cleared when the set
	// of rooms in views changes.
	changed chan struct{}
	sigMu   sync.Mutex
	local   map[string]*Signals // origin signals since the last Control, by room (adaptive.go)
	events  event.Emitter       // nil: no events
	// counts are the rooms' counts for the counted events (events.go); nil
	// without events.
	counts     *counts
	countEvery time.Duration
	turns      turns // held status polls (turn.go)
}

// View is a room's stats as last read by this instance, with the measured
// admission rate.
type View struct {
	Stats
	// Rates are the room's measured rates over refreshes during which
	// someone waited: Rate starts from the rate in force (0 in a room that
	// admits nobody) and is set anew when that rate changes (follow);
	// Leave starts from 0.
	forecast.Rates
	// At is when the stats were read.
	At time.Time
	// marks are the admissions counted at past refreshes (Admitted).
	marks *marks
}

// New returns a Queue over store. It starts nothing; call Run.
func New(store Store, o Options) *Queue {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Refresh <= 0 {
		o.Refresh = 100 * time.Millisecond
	}
	if o.IdleRefresh <= 0 {
		o.IdleRefresh = DefaultIdleRefresh
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxHeld <= 0 {
		o.MaxHeld = DefaultMaxHeld
	}
	q := &Queue{store: WithTimeout(store, o.StoreTimeout), control: controlOf(store, o.StoreTimeout), raw: store, now: o.Now, refresh: o.Refresh, idleRefresh: o.IdleRefresh,
		metrics: o.Metrics, log: o.Logger,
		local: make(map[string]*Signals), events: o.Events, countEvery: o.CountEvery}
	q.views.Store(&map[string]*viewSlot{})
	q.due = dueRooms{every: map[string]struct{}{}, at: map[string]time.Time{}}
	if o.Events != nil {
		q.counts = &counts{}
		q.counts.rooms.Store(&map[string]*tally{})
		if q.countEvery <= 0 {
			q.countEvery = DefaultCountEvery
		}
	}
	q.turns.max, q.turns.rooms = o.MaxHeld, make(map[string]map[string]*heldPoll)
	return q
}

// Now returns the Queue's clock reading.
func (q *Queue) Now() time.Time { return q.now() }

func checkRoom(room string) error {
	if !ValidRoomID(room) {
		return ErrInvalid.Detail("room id %q: want [a-z0-9][a-z0-9-]{0,63}", room)
	}
	return nil
}

func checkVisitor(room, visitor string) error {
	if err := checkRoom(room); err != nil {
		return err
	}
	if !ValidVisitorID(visitor) {
		return ErrInvalid.Detail("visitor id: want 1 to %d printable ASCII bytes without spaces", MaxVisitorID)
	}
	return nil
}

// PutRoom validates and stores a room's settings. A room draws once: after
// its draw, the store refuses a change of OpensAt (ErrDrawn). A room
// switched to adaptive admission starts its controller afresh (its rate
// from AdmitRate, its baseline learned again).
func (q *Queue) PutRoom(ctx context.Context, room string, s Settings) error {
	if err := checkRoom(room); err != nil {
		return err
	}
	s, err := q.valid(s)
	if err != nil {
		return err
	}
	if _, err := q.store.PutRoom(ctx, room, s, PutOptions{}); err != nil {
		return err
	}
	return q.refreshRoom(ctx, room)
}

// valid is s as stored, or why the room cannot have it.
func (q *Queue) valid(s Settings) (Settings, error) {
	if err := s.Validate(); err != nil {
		return s, err
	}
	if s.Admission == Adaptive && q.control == nil {
		return s, ErrInvalid.Detail("admission: adaptive needs a store that keeps controller state; this one does not")
	}
	return s, nil
}

// EnsureRoom creates the room with settings s unless it exists; an
// existing room is left unchanged.
func (q *Queue) EnsureRoom(ctx context.Context, room string, s Settings) (created bool, err error) {
	if err := checkRoom(room); err != nil {
		return false, err
	}
	if s, err = q.valid(s); err != nil {
		return false, err
	}
	if created, err = q.store.PutRoom(ctx, room, s, PutOptions{OnlyCreate: true}); err != nil || !created {
		return created, err
	}
	return true, q.refreshRoom(ctx, room)
}

// Rooms lists room ids.
func (q *Queue) Rooms(ctx context.Context) ([]string, error) {
	return q.store.Rooms(ctx)
}

// Room reads a room's stats from the store, with the measured rate.
func (q *Queue) Room(ctx context.Context, room string) (View, error) {
	if err := checkRoom(room); err != nil {
		return View{}, err
	}
	st, err := q.store.Stats(ctx, room, q.now())
	if err != nil {
		return View{}, err
	}
	v := newView(st, q.now())
	if old, ok := q.View(room); ok {
		v.carry(old)
	}
	return v, nil
}

// View returns this instance's latest view of the room, if it has one.
func (q *Queue) View(room string) (View, bool) {
	if v := q.view(room); v != nil {
		return *v, true
	}
	return View{}, false
}

// view is View without the copy, for the callers that read a field or
// two: nil without a view. The View it points to never changes.
func (q *Queue) view(room string) *View {
	if slot, ok := (*q.views.Load())[room]; ok {
		return slot.v.Load()
	}
	return nil
}

// Enter puts the visitor in the room's queue (idempotent). With events,
// the store call runs to its end (or Options.StoreTimeout) even when ctx
// is cancelled, a client gone mid-request: the store may have made the
// place already, and the counts must know.
func (q *Queue) Enter(ctx context.Context, room, visitor string) (Entry, bool, error) {
	if err := checkVisitor(room, visitor); err != nil {
		return Entry{}, false, err
	}
	if q.counts != nil {
		ctx = context.WithoutCancel(ctx)
	}
	return q.entered(ctx, room, func(ctx context.Context) (Entry, bool, error) {
		return q.store.Enter(ctx, room, visitor, q.now(), EnterOptions{})
	})
}

// EnterLane puts the visitor in the room's priority lane with a verified
// lane code (EnterOptions.Lane), as Enter does in the line.
func (q *Queue) EnterLane(ctx context.Context, room, visitor string, code LaneCode) (Entry, bool, error) {
	if err := checkVisitor(room, visitor); err != nil {
		return Entry{}, false, err
	}
	if code.ID == "" || code.Uses < 1 || code.Uses > MaxLaneUses {
		return Entry{}, false, ErrInvalid.Detail("lane code: want an id and 1 to %d uses", MaxLaneUses)
	}
	if q.counts != nil {
		ctx = context.WithoutCancel(ctx)
	}
	return q.entered(ctx, room, func(ctx context.Context) (Entry, bool, error) {
		return q.store.Enter(ctx, room, visitor, q.now(), EnterOptions{Lane: &code})
	})
}

// entered runs an entry and counts it.
func (q *Queue) entered(ctx context.Context, room string, enter func(context.Context) (Entry, bool, error)) (Entry, bool, error) {
	e, created, err := enter(ctx)
	switch {
	case err == nil:
		e = q.inDraw(room, e)
		q.wakeIfWaiting(room, e)
		q.metrics.entered(room, e, created)
		if created && q.counts != nil {
			q.countEntered(room, e)
		}
	case errors.Is(err, ErrQueueFull):
		q.metrics.refused(room)
		err = fullError{err}
	case errors.Is(err, ErrRoomClosed) && q.soldOut(ctx, room):
		err = fmt.Errorf("%w: %w", ErrSoldOut, err)
	}
	return e, created, err
}

// soldOut reports whether room acts sold out, by this instance's view or,
// without one, the store (an entry refused as closed costs one read more).
func (q *Queue) soldOut(ctx context.Context, room string) bool {
	if v := q.view(room); v != nil {
		return v.EffectiveState() == SoldOut
	}
	st, err := q.store.Stats(ctx, room, q.now())
	return err == nil && st.EffectiveState() == SoldOut
}

// FullRetryAfter is the Retry-After of an entry refused because the line is
// full: a place frees with every admission and every leave, but a crowd
// told to come back at once would only be refused again.
const FullRetryAfter = 10 * time.Second

// fullError is ErrQueueFull with its Retry-After (fault.Delayed).
type fullError struct{ error }

func (e fullError) Unwrap() error                { return e.error }
func (fullError) FaultRetryAfter() time.Duration { return FullRetryAfter }

// Status returns the visitor's entry. seq is the sequence number from the
// visitor's ticket. When this instance's view of the room is fresh and seq is
// behind the near zone (View.Near), the answer is an estimate made
// without a store call (estimated = true): Position = seq − HeadSeq + 1.
//
// Error bound: for the visitor's current ticket the estimate is never better
// than the truth. It exceeds the exact position by the number of visitors
// between the head and seq who left the queue, plus those admitted since the
// view was read (views up to two seconds old are used). It does not notice
// that the visitor itself left, and an old ticket kept after leaving and
// entering again shows its old place (display only: admission follows the
// store). A seq beyond the room's last issued one (a ticket from before the
// store lost its data) gets the exact answer. Near the front, or once seq is
// at or behind the head, the answer is exact and, for an admitted visitor,
// renews the slot (see Store.Status).
//
// Before a room's opening draw, a pre-queue entry's ticket (seq
// PreQueueSeq, TicketSeq) gets Waiting at position 0 from a fresh view
// while the view says the room is still in its pre-queue (View.PreQueue),
// without a store call. It does not notice that the visitor left. After
// the draw the store assigns the place: the caller issues a new ticket with
// its Seq.
//
// issued is when the ticket was issued: a ticket older than the store's
// keeping of the room's queue (Stats.Since: a memory store restarted)
// always gets the exact answer.
func (q *Queue) Status(ctx context.Context, room, visitor string, seq int64, issued time.Time) (e Entry, estimated bool, err error) {
	if err := checkVisitor(room, visitor); err != nil {
		return Entry{}, false, err
	}
	now := q.now()
	if v := q.view(room); v != nil && now.Sub(v.At) < staleAfter && !issued.Before(v.Since) {
		if seq == PreQueueSeq && (v.PreQueue(now) || v.drawPending(now, issued)) {
			q.metrics.polled(room, true)
			return Entry{Visitor: visitor, Status: Waiting}, true, nil
		}
		if pos := seq - v.HeadSeq + 1; seq >= v.HeadSeq && seq <= v.LastSeq && pos > v.Near() {
			q.metrics.polled(room, true)
			return Entry{Visitor: visitor, Status: Waiting, Seq: seq, Position: pos}, true, nil
		}
	}
	e, err = q.store.Status(ctx, room, visitor, now)
	if err == nil {
		e = q.inDraw(room, e)
		q.wakeIfWaiting(room, e) // a parked visitor who came back
		q.metrics.polled(room, false)
	}
	return e, false, err
}

// inDraw is e as its visitor is told it: waiting at position 0, with no
// place yet, while it waits for its window's draw in a random room
// (View.InDraw).
func (q *Queue) inDraw(room string, e Entry) Entry {
	if v := q.view(room); v != nil && v.InDraw(q.now(), e) {
		e.Position = 0
	}
	return e
}

// HoldPlace keeps a waiting visitor from being told it moved back. e is
// the visitor's entry from Status on a ticket with sequence number seq,
// and shown the position the client last showed for that ticket (0: none;
// wire.ShownHeader). When e waits at that same place (e.Seq is seq)
// further back than shown, HoldPlace returns it at position shown, and
// counts the rise (usher_position_rises_total). Such a rise is one of the
// answer, never of the order: an estimate from a view a moment older than
// the last one's (another instance, a restart), a near zone that shrank
// back to estimates, or parked visitors who came back ahead. Admission
// follows the store: shown changes only what this visitor is told, so a
// client that lies about it deceives itself alone.
func (q *Queue) HoldPlace(room string, e Entry, seq, shown int64) Entry {
	if e.Status == Waiting && e.Seq == seq && shown > 0 && e.Position > shown {
		q.metrics.rose(room)
		e.Position = shown
	}
	return e
}

// wakeIfWaiting marks room for re-reading at the next refresh when e waits
// in it and this instance's view shows nobody waiting: the admission step
// must see it.
func (q *Queue) wakeIfWaiting(room string, e Entry) {
	if e.Status != Waiting {
		return
	}
	if v := q.view(room); v == nil || v.Waiting == 0 {
		q.woken.Store(room, struct{}{})
	}
}

// staleAfter is the age at which a view is no longer used for estimates:
// when refreshes fail (store down), polls go to the store and fail honestly.
const staleAfter = 2 * time.Second

// PreQueueSeq is the sequence number in the ticket of a pre-queue entry,
// which has none yet: it tells Status that the poll may be answered from
// the view while the room is in its pre-queue.
const PreQueueSeq = -1

// TicketSeq is the sequence number a ticket for entry e carries: e.Seq, or
// PreQueueSeq for a pre-queue entry (waiting at position 0).
func TicketSeq(e Entry) int64 {
	if e.Status == Waiting && e.Position == 0 {
		return PreQueueSeq
	}
	return e.Seq
}

// Reticket reports whether a poll on a ticket with sequence number seq,
// issued at issued, that was answered e should give the visitor a new
// ticket, so that its next polls are answered from the view: it waits, and
// its place got or changed its sequence number (the opening draw, a random
// room's), or the ticket predates the store's Stats.Since (its polls would
// all reach the store).
func (q *Queue) Reticket(room string, e Entry, seq int64, issued time.Time) bool {
	if e.Status != Waiting || e.Seq == 0 {
		return false
	}
	if e.Seq != seq {
		return true
	}
	v := q.view(room)
	return v != nil && issued.Before(v.Since)
}

// Renew slides an admitted visitor's expiry and returns the new one;
// ErrNotAdmitted when the visitor holds no active slot.
func (q *Queue) Renew(ctx context.Context, room, visitor string) (time.Time, error) {
	if err := checkVisitor(room, visitor); err != nil {
		return time.Time{}, err
	}
	e, err := q.store.Status(ctx, room, visitor, q.now())
	if err != nil {
		return time.Time{}, err
	}
	if e.Status != Active {
		return time.Time{}, fmt.Errorf("queue: renew %s in %s: %w", visitor, room, ErrNotAdmitted)
	}
	return e.ExpiresAt, nil
}

// Leave frees the visitor's queue place or active slot. With events, it
// reads the entry first, to count where the visitor left from.
func (q *Queue) Leave(ctx context.Context, room, visitor string) error {
	if err := checkVisitor(room, visitor); err != nil {
		return err
	}
	if q.counts != nil {
		return q.leaveObserved(ctx, room, visitor)
	}
	return q.store.Leave(ctx, room, visitor)
}

// SetInventory records the units the room's sale has left (0 to
// MaxInventory): at 0 the room acts sold out until they come back, and
// while they are few admission keeps to Settings.VisitorsPerUnit per unit
// (Store.SetInventory). The view shows it at its next refresh.
func (q *Queue) SetInventory(ctx context.Context, room string, units int64) error {
	if err := checkRoom(room); err != nil {
		return err
	}
	if units < 0 || units > MaxInventory {
		return ErrInvalid.Detail("inventory %d: want 0 to %d", units, MaxInventory)
	}
	if err := q.store.SetInventory(ctx, room, units); err != nil {
		return err
	}
	q.woken.Store(room, struct{}{}) // the view's sold-out state follows at the next refresh
	return nil
}

// Admit runs one admission step for the room.
func (q *Queue) Admit(ctx context.Context, room string) (AdmitResult, error) {
	start := time.Now()
	res, err := q.store.Admit(ctx, room, q.now())
	q.metrics.stepped(room, res, time.Since(start), err)
	if len(res.Admitted) > 0 {
		q.turns.admitted(room, res.Admitted)
	}
	if err == nil && q.counts != nil {
		q.countStep(room, res)
	}
	return res, err
}

// Run refreshes the view of every room every Refresh until ctx ends. A failed
// refresh is retried, logged once per outage (OutageLog); views older than
// two seconds are not used.
// It is usher's one room-discovery loop: a room the store lists or wakes
// joins the view, a room a read or the list finds gone leaves it
// (listEvery), and ViewRooms' subscribers (the admission scheduler) learn
// of both. Status polls are held (AwaitTurn) only while it runs: when ctx
// ends, every held poll answers at once.
func (q *Queue) Run(ctx context.Context) error {
	t := time.NewTicker(q.refresh)
	defer t.Stop()
	q.turns.setOpen(true)
	stop := context.AfterFunc(ctx, func() { q.turns.setOpen(false) })
	defer func() {
		if stop() { // Run ended by itself
			q.turns.setOpen(false)
		}
	}()
	if w, ok := q.raw.(Waker); ok {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			q.listen(ctx, w)
		}()
	}
	failures := NewOutageLog(q.log, "refresh room views")
	for {
		if err := q.refreshAll(ctx); ctx.Err() == nil {
			failures.Observe(err, q.now())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// listen marks the rooms w wakes for re-reading until ctx ends, subscribing
// again a second after the feed breaks.
func (q *Queue) listen(ctx context.Context, w Waker) {
	for {
		err := w.Wakes(ctx, func(room string) { q.woken.Store(room, struct{}{}) })
		if ctx.Err() != nil {
			return
		}
		q.relist.Store(true) // wakes may have been lost meanwhile
		q.log.Warn("room wakes", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// refreshAll re-reads the views that are due (dueRooms), the rooms woken
// since the last refresh, and the listed rooms without a view. Each store
// call has the store deadline, so a hung store leaves the views stale (and
// logged) instead of stopping the loop; a view whose read failed is due
// again at the next refresh. The reads run concurrently (readStats).
func (q *Queue) refreshAll(ctx context.Context) error {
	views := *q.views.Load()
	listedAt := q.now()
	var rooms []string // the store's list, when this refresh reads it
	listed := q.lastList.IsZero() || q.relist.Swap(false) || listedAt.Sub(q.lastList) >= q.listEvery(len(views))
	if listed {
		var err error
		if rooms, err = q.store.Rooms(ctx); err != nil {
			return err
		}
		q.lastList = listedAt
	}
	now := q.now()
	q.mu.Lock()
	due := q.due.take(now, nil)
	q.mu.Unlock()
	var woken []string
	q.woken.Range(func(room, _ any) bool {
		q.woken.Delete(room)
		woken = append(woken, room.(string))
		return true
	})
	if listed {
		if !slices.IsSorted(rooms) {
			slices.Sort(rooms)
		}
		for _, room := range rooms {
			if _, ok := views[room]; !ok {
				due = append(due, room)
			}
		}
	}
	inList := func(room string) bool {
		_, ok := slices.BinarySearch(rooms, room)
		return ok
	}
	for _, room := range woken {
		if listed && !inList(room) { // made after the list: at the next refresh
			q.woken.Store(room, struct{}{})
			continue
		}
		due = append(due, room)
	}
	read := make(map[string]bool, len(due))
	toRead := due[:0]
	for _, room := range due {
		if !read[room] && (!listed || inList(room)) {
			read[room] = true
			toRead = append(toRead, room)
		}
	}
	got, readErrs := q.readStats(ctx, toRead, now)
	stats := make(map[string]Stats, len(toRead))
	var errs []error
	var failed, gone []string
	for i, room := range toRead {
		_, viewed := views[room]
		switch err := readErrs[i]; {
		case errors.Is(err, ErrRoomNotFound): // deleted, or lost with a flushed store
			if viewed {
				gone = append(gone, room)
			}
		case err != nil:
			errs = append(errs, err)
			if viewed {
				failed = append(failed, room)
			}
		default:
			stats[room] = got[i]
		}
	}
	if len(failed) > 0 {
		q.mu.Lock()
		for _, room := range failed {
			q.due.retry(room, now)
		}
		q.mu.Unlock()
	}
	if len(stats) > 0 {
		q.apply(now, stats)
	}
	q.dropViews(gone, now)
	if listed {
		var unlisted []string // lost by the store, unless made again since the list
		for room := range views {
			if !inList(room) {
				unlisted = append(unlisted, room)
			}
		}
		q.dropViews(unlisted, listedAt)
	}
	return errors.Join(errs...)
}

// readStats reads the rooms' stats, up to refreshReaders at a time, so that
// a networked store's client pipelines them (one round trip for many rooms
// instead of one each).
func (q *Queue) readStats(ctx context.Context, rooms []string, now time.Time) ([]Stats, []error) {
	stats, errs := make([]Stats, len(rooms)), make([]error, len(rooms))
	var g errgroup.Group
	g.SetLimit(refreshReaders)
	for i, room := range rooms {
		g.Go(func() error {
			stats[i], errs[i] = q.store.Stats(ctx, room, now)
			return nil
		})
	}
	g.Wait()
	return stats, errs
}

// refreshReaders bounds a refresh's concurrent store reads.
const refreshReaders = 32

// listEvery is how often refreshAll reads the store's room list, holding
// rooms views. A Waker store names the rooms made or deleted elsewhere, and
// a read that finds a room gone drops its view: its list is a backstop for
// wakes lost, read once per IdleRefresh and at the refresh after the wake
// feed broke. Other stores' lists are read at every refresh while the view
// holds at most roomsPerList rooms, and every refresh per roomsPerList
// beyond.
func (q *Queue) listEvery(rooms int) time.Duration {
	if _, ok := q.raw.(Waker); ok {
		return q.idleRefresh
	}
	return q.refresh * time.Duration(rooms/roomsPerList)
}

const roomsPerList = 1000

// Busy returns a channel that is closed when this instance's view of room
// next shows someone waiting. Take it before asking RestLeft, so that a
// refresh between the two is not missed.
func (q *Queue) Busy(room string) <-chan struct{} {
	ch, ok := q.busy.Load(room)
	if !ok {
		ch, _ = q.busy.LoadOrStore(room, make(chan struct{}))
	}
	return ch.(chan struct{})
}

// RestLeft is how much longer nobody waits in room, as this instance's
// view read it: until the view is IdleRefresh old (when the refresh reads
// it again), or 0 when someone waits. An admission step within it would
// admit nobody, and the admission scheduler skips them. A room this
// instance's view does not know, or knows only from an older read (the
// store is failing), does not rest.
func (q *Queue) RestLeft(room string) time.Duration {
	v := q.view(room)
	if v == nil || v.Waiting > 0 {
		return 0
	}
	return max(0, q.idleRefresh-q.now().Sub(v.At))
}

// refreshRoom re-reads one room's stats (after its settings changed).
func (q *Queue) refreshRoom(ctx context.Context, room string) error {
	now := q.now()
	st, err := q.store.Stats(ctx, room, now)
	if err != nil {
		return err
	}
	q.apply(now, map[string]Stats{room: st})
	return nil
}

// apply installs new views for the rooms in stats, updating measured rates.
// Other views are kept (they go stale if refreshes fail); dropViews
// removes the rooms a refresh finds gone.
func (q *Queue) apply(now time.Time, stats map[string]Stats) {
	q.mu.Lock()
	defer q.mu.Unlock()
	old := *q.views.Load()
	next, cloned := old, false // cloned before the set of rooms changes
	grow := func() {
		if !cloned {
			next, cloned = maps.Clone(old), true
		}
	}
	for room, st := range stats {
		v := newView(st, now)
		slot, ok := next[room]
		var prev View
		if ok {
			prev = *slot.v.Load()
			v.carry(prev)
			v.marks = prev.marks
			switch {
			case !now.After(prev.At):
			case prev.Waiting > 0:
				v.Measure(prev.counts(), v.counts(), v.Settings.Interval)
			default:
				v.Rest(now)
			}
		} else {
			grow()
			slot = &viewSlot{}
			next[room] = slot
		}
		v.marks = v.marks.with(now, st.AdmittedTotal)
		slot.v.Store(&v)
		q.due.viewed(room, st.Waiting > 0, now, q.idleRefresh)
		if ok {
			q.turns.refreshed(room, &prev, &v)
		}
		q.metrics.observed(room, st)
	}
	for room, st := range stats {
		if st.Waiting > 0 {
			if ch, ok := q.busy.LoadAndDelete(room); ok {
				close(ch.(chan struct{}))
			}
		}
	}
	if !cloned {
		return
	}
	q.views.Store(&next)
	if q.changed != nil {
		close(q.changed)
		q.changed = nil
	}
}
