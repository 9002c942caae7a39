// Package sale is the booking flow behind the gate: the seat map snapshot,
// seat holds, general-admission stock (stock.go), reservations submitted
// through the message queue, and the consumer that decides them in SQL at
// the pace the database can take.
//
// The three lines of defence of seed 002/003 meet here: the hold store lets
// only one visitor hold a seat (SET NX with expiry, all seats or none); the
// broker buffers reservations so that the database sees at most Workers
// concurrent writers however many visitors click at once; and SQL's
// conditional UPDATE sells a seat once even if the hold store was wrong.
package sale

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"usher/internal/booking"
	"usher/internal/event"
	"usher/internal/fault"
	"usher/internal/hold"
	"usher/internal/mq"
	"usher/internal/queue"
)

// Errors of the booking flow (the backends' errors pass through wrapped).
var (
	// ErrSeatUnknown: a seat id that the schedule does not have.
	ErrSeatUnknown = fault.New(fault.SeatUnknown, "unknown seat")
	// ErrNotHeld: the caller does not hold every seat it wants to reserve;
	// see *NotHeldError.
	ErrNotHeld = fault.New(fault.SeatsNotHeld, "seats not held by the caller")
	// ErrInvalid: malformed input; validators return ErrInvalid.Detail
	// naming the field.
	ErrInvalid = fault.New(fault.Invalid, "invalid input")
	// ErrBuyerLimit: the visitor would hold or buy more than BuyerLimit
	// tickets of the schedule.
	ErrBuyerLimit = fault.New(fault.BuyerLimit, "ticket limit per buyer reached for this schedule")
	// ErrNoAdjacent: no row has the adjacent seats a best-available hold
	// asks for (best.go).
	ErrNoAdjacent = fault.New(fault.SoldOut, "not that many adjacent seats free")
	// ErrRoomOfSchedule: deleting the waiting room of a schedule, which
	// the service would create again within seconds (provisionRooms).
	ErrRoomOfSchedule = fault.New(fault.RoomOfSchedule, "the room gates a schedule; close it instead of deleting it")
)

// NotHeldError lists the seats the caller does not hold.
type NotHeldError struct{ Seats []string }

func (e *NotHeldError) Error() string { return fmt.Sprintf("%v: %v", ErrNotHeld, e.Seats) }

// Unwrap makes errors.Is(err, ErrNotHeld) true and gives the error its code.
func (e *NotHeldError) Unwrap() error { return ErrNotHeld }

// FaultSeats shows the client the seats at fault (fault.Seats).
func (e *NotHeldError) FaultSeats() []string { return e.Seats }

// Config wires a Service. Catalog, Holds, Broker and Queue are required.
type Config struct {
	Catalog booking.Store
	Holds   hold.Store
	Broker  mq.Broker
	Queue   *queue.Queue
	// HoldTTL is how long a hold lasts (default 5 min).
	HoldTTL time.Duration
	// SeatLimit is the most seats one visitor holds at once in a schedule,
	// and the most seats in one reservation (default 4).
	SeatLimit int
	// StockLimit is the most general-admission units one visitor holds at
	// once in a schedule (default 4).
	StockLimit int
	// BuyerLimit, above 0, is the most tickets (seats and units) one
	// visitor buys of a schedule across its reservations (buyer.go);
	// 0: no limit.
	BuyerLimit int
	// SnapshotEvery is the most often a schedule's seat map is rebuilt from
	// SQL and the hold store (default 500 ms).
	SnapshotEvery time.Duration
	// Workers is the consumer's concurrency: the database pool size
	// (default 4). MaxBatch is the most reservations per Decide (default 64).
	Workers, MaxBatch int
	// RetryAfter is how long a batch waits after a database fault (default 2 s).
	RetryAfter time.Duration
	// InventoryEvery is how often each schedule's units left are counted
	// and written to its room (default 1 s; NoInventory: never;
	// inventory.go).
	InventoryEvery time.Duration
	// Events receives the holds' and submissions' events (events.go);
	// nil emits none.
	Events event.Emitter
	Now    func() time.Time
	Logger *slog.Logger
	// Registry receives the booking metrics (metrics.go); nil: none.
	Registry prometheus.Registerer
}

// Service runs the booking flow.
type Service struct {
	cfg       Config
	metrics   *metrics
	mu        sync.Mutex
	schedules map[int64]booking.Schedule // immutable once created
	maps      map[int64]*seatMapSlot
	watchers  map[int64]*watcher // follow.go
}

type seatMapSlot struct {
	build sync.Mutex // one rebuild at a time per schedule
	// best serializes this instance's best-available holds of the
	// schedule (HoldBest): each picks its block after the one before has
	// marked its seats held, so that a crowd does not race for one block.
	best  sync.Mutex
	mu    sync.Mutex // guards the fields below, never held during a rebuild
	cur   *SeatMap
	tried time.Time // last rebuild attempt
	// gen counts the seats added on this instance (seatsAdded): a
	// rebuild that began before one leaves its map due for another.
	gen uint64
	// building is true while a rebuild runs: other callers take cur.
	building bool
	// sold holds seats this instance saw confirmed, held seats it held,
	// each with when, until a rebuild that started later shows them: Hold
	// refuses the sold at once, and best available passes over both, so
	// that the requests of one instance do not race for the block its
	// last snapshot shows best.
	sold, held map[int64]time.Time
	// history holds the last statuses made, oldest first (seatmap.go).
	hmu     sync.Mutex
	history []*status
}

// staleLimit is how old a seat map may be served while the database or
// the hold store cannot be read.
const staleLimit = time.Minute

// SeatMap is a schedule's seats as of BuiltAt: SQL's AVAILABLE/SOLD, with
// seats under a live hold shown as HELD.
type SeatMap struct {
	ScheduleID int64          `json:"schedule_id"`
	Seats      []booking.Seat `json:"seats"`
	BuiltAt    time.Time      `json:"built_at"`
	byID       map[int64]int
	json, gzip func() []byte
	slot       *seatMapSlot
	layout     func() *layout // seatmap.go
	status     func() *status
	rows       func() []seatRow // best.go
	// sameAs, while SeatMap makes the map, is the map whose layout it
	// has (readSeats).
	sameAs *SeatMap
}

// JSON is the seat map's JSON encoding, made once per snapshot.
func (m *SeatMap) JSON() []byte { return m.json() }

// Gzip is JSON gzipped, made once per snapshot when first asked for: a
// 50,000-seat map gzipped per request would take the instance's CPU.
func (m *SeatMap) Gzip() []byte { return m.gzip() }

// New returns a Service. It starts nothing; call Run for the consumer.
func New(c Config) *Service {
	if c.HoldTTL <= 0 {
		c.HoldTTL = 5 * time.Minute
	}
	if c.SeatLimit <= 0 {
		c.SeatLimit = 4
	}
	if c.StockLimit <= 0 {
		c.StockLimit = 4
	}
	if c.SnapshotEvery <= 0 {
		c.SnapshotEvery = 500 * time.Millisecond
	}
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 64
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = 2 * time.Second
	}
	if c.InventoryEvery == 0 {
		c.InventoryEvery = time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: c, metrics: newMetrics(c.Registry, c.Broker), schedules: map[int64]booking.Schedule{}, maps: map[int64]*seatMapSlot{}, watchers: map[int64]*watcher{}}
}

// Scope is the hold store scope of a schedule.
func Scope(scheduleID int64) string { return "schedule-" + strconv.FormatInt(scheduleID, 10) }

func seatKey(id int64) string { return strconv.FormatInt(id, 10) }

// Schedule returns a schedule (cached: schedules do not change).
func (s *Service) Schedule(ctx context.Context, id int64) (booking.Schedule, error) {
	s.mu.Lock()
	sch, ok := s.schedules[id]
	s.mu.Unlock()
	if ok {
		return sch, nil
	}
	sch, err := s.cfg.Catalog.Schedule(ctx, id)
	if err != nil {
		return booking.Schedule{}, err
	}
	s.mu.Lock()
	s.schedules[id] = sch
	s.mu.Unlock()
	return sch, nil
}

// SeatMap returns the schedule's seat map, rebuilt when older than
// SnapshotEvery, so that a thousand visitors polling it cost the database
// about one query per SnapshotEvery. One caller rebuilds; while it does,
// the others take the last map instead of waiting (holds and polls do not
// queue behind the rebuild's query) if it is less than 4 SnapshotEvery old
// (2 s by default). While the database or the hold store cannot be read, the
// last map is served for up to a minute (its BuiltAt tells) and a rebuild
// is tried at most every SnapshotEvery.
func (s *Service) SeatMap(ctx context.Context, scheduleID int64) (*SeatMap, error) {
	s.mu.Lock()
	slot := s.maps[scheduleID]
	if slot == nil {
		slot = &seatMapSlot{sold: map[int64]time.Time{}, held: map[int64]time.Time{}}
		s.maps[scheduleID] = slot
	}
	s.mu.Unlock()
	if m, ok := slot.current(s.cfg.Now(), s.cfg.SnapshotEvery, true); ok {
		return m, nil
	}
	slot.build.Lock()
	defer slot.build.Unlock()
	now := s.cfg.Now()
	if m, ok := slot.current(now, s.cfg.SnapshotEvery, false); ok {
		return m, nil // rebuilt while this caller waited
	}
	slot.mu.Lock()
	slot.building = true
	prev := slot.cur // only rebuilds, under slot.build, change it
	gen := slot.gen
	slot.mu.Unlock()
	m, err := s.buildSeatMap(ctx, scheduleID, now, prev)
	if err == nil {
		// Made before slot.mu is taken: holds take it (mark, marked) and
		// must not wait for 50,000 seats to be compared.
		m.slot = slot
		if prev != nil && (m.sameAs == prev || sameLayout(prev.Seats, m.Seats)) {
			m.layout, m.rows = prev.layout, prev.rows
		} else {
			seats := m.Seats
			m.layout = sync.OnceValue(func() *layout { return buildLayout(scheduleID, seats) })
			m.rows = sync.OnceValue(func() []seatRow { return buildRows(seats) })
		}
		m.sameAs = nil // the previous map is not kept alive
		m.status = sync.OnceValue(func() *status { return s.buildStatus(slot, m) })
	}
	slot.mu.Lock()
	defer slot.mu.Unlock()
	slot.building = false
	if err != nil && ctx.Err() != nil {
		return nil, err // the caller left: the next one rebuilds
	}
	slot.tried = now
	if slot.gen != gen { // seats were added while it read: rebuild at the next call
		slot.tried = time.Time{}
	}
	switch {
	case err == nil:
		slot.cur = m
		for _, recent := range []map[int64]time.Time{slot.sold, slot.held} {
			for id, at := range recent {
				if at.Before(now) { // the rebuild read SQL and holds after it
					delete(recent, id)
				}
			}
		}
	case slot.cur != nil && now.Sub(slot.cur.BuiltAt) < staleLimit:
		s.cfg.Logger.Warn("serving a stale seat map", "schedule", scheduleID, "built_at", slot.cur.BuiltAt, "err", err)
	default:
		return nil, err
	}
	return slot.cur, nil
}

// current returns the slot's map when it needs no rebuild, or, with
// duringBuild, when another caller is rebuilding it and it is less than
// 4 every old.
func (slot *seatMapSlot) current(now time.Time, every time.Duration, duringBuild bool) (*SeatMap, bool) {
	slot.mu.Lock()
	defer slot.mu.Unlock()
	switch m := slot.cur; {
	case m == nil:
		return nil, false
	case now.Sub(slot.tried) < every:
		return m, true
	case duringBuild && slot.building && now.Sub(m.BuiltAt) < 4*every:
		return m, true
	}
	return nil, false
}

// buildSeatMap reads the schedule's seats (readSeats) and holds into a new
// map; prev is the current map, nil if none.
func (s *Service) buildSeatMap(ctx context.Context, scheduleID int64, now time.Time, prev *SeatMap) (*SeatMap, error) {
	if _, err := s.Schedule(ctx, scheduleID); err != nil {
		return nil, err
	}
	seats, same, err := s.readSeats(ctx, scheduleID, prev)
	if err != nil {
		return nil, err
	}
	held, err := s.cfg.Holds.HeldSeats(ctx, Scope(scheduleID), now)
	if err != nil {
		return nil, err
	}
	isHeld := make(map[string]bool, len(held))
	for _, id := range held {
		isHeld[id] = true
	}
	m := &SeatMap{ScheduleID: scheduleID, Seats: seats, BuiltAt: now}
	if same {
		m.byID, m.sameAs = prev.byID, prev // never written once built
	} else {
		m.byID = make(map[int64]int, len(seats))
		for i := range seats {
			m.byID[seats[i].ID] = i
		}
	}
	nHeld := 0
	for i := range seats {
		if seats[i].Status != booking.Sold && isHeld[seatKey(seats[i].ID)] {
			seats[i].Status = booking.Held
			nHeld++
		}
	}
	s.metrics.seatsHeld(scheduleID, nHeld)
	m.json = sync.OnceValue(func() []byte {
		b, _ := json.Marshal(m)
		return b
	})
	m.gzip = sync.OnceValue(func() []byte { return gzipped(m.JSON(), gzip.DefaultCompression) })
	return m, nil
}

// readSeats reads a schedule's seats from SQL. With the current map prev
// at hand and a catalog that offers booking.SeatStater, it reads only the
// count of seats and the taken ones, and copies the layout from prev (same
// true) while the count says it is unchanged: at 50,000 seats a rebuild
// then moves the ids of the seats sold instead of every seat's section,
// row, number and price, which costs the database and this instance tens
// of milliseconds of CPU every SnapshotEvery, and the holds running beside
// it their latency. Seats.ReservationID stays empty on that path (no
// reader of the map uses it).
func (s *Service) readSeats(ctx context.Context, scheduleID int64, prev *SeatMap) (seats []booking.Seat, same bool, err error) {
	if st, ok := s.cfg.Catalog.(booking.SeatStater); ok && prev != nil {
		total, taken, err := st.SeatStates(ctx, scheduleID)
		if err != nil {
			return nil, false, err
		}
		if total == len(prev.Seats) {
			seats = slices.Clone(prev.Seats)
			for i := range seats {
				seats[i].Status, seats[i].ReservationID = booking.Available, ""
			}
			same = true
			for _, t := range taken {
				i, ok := prev.byID[t.ID]
				if !ok { // a count unchanged while seats were added? read them all
					same = false
					break
				}
				seats[i].Status = t.Status
			}
			if same {
				return seats, true, nil
			}
		}
	}
	seats, err = s.cfg.Catalog.Seats(ctx, scheduleID)
	return seats, false, err
}

// checkSeats validates a request's seat list: 1 to SeatLimit seats, no
// duplicates, all in the schedule. It checks them against the recent seat
// map (recentSeatMap), and against SeatMap's when that one lacks one.
func (s *Service) checkSeats(ctx context.Context, scheduleID int64, seats []int64) (*SeatMap, error) {
	if len(seats) == 0 || len(seats) > s.cfg.SeatLimit {
		return nil, ErrInvalid.Detail("seat_ids: want 1 to %d seat ids", s.cfg.SeatLimit)
	}
	if len(uniq(seats)) != len(seats) {
		return nil, ErrInvalid.Detail("seat_ids: a seat id twice")
	}
	unknown := func(m *SeatMap) []string {
		var ids []string
		for _, id := range seats {
			if _, ok := m.byID[id]; !ok {
				ids = append(ids, seatKey(id))
			}
		}
		return ids
	}
	m, err := s.recentSeatMap(ctx, scheduleID)
	if err == nil && len(unknown(m)) > 0 { // added since it was built?
		m, err = s.SeatMap(ctx, scheduleID)
	}
	if err != nil {
		return nil, err
	}
	if ids := unknown(m); len(ids) > 0 {
		return nil, ErrSeatUnknown.Detail("seat_ids %s: not in the schedule", strings.Join(ids, ","))
	}
	return m, nil
}

// recentFor is how many SnapshotEvery old a seat map may be for a hold or
// a reservation (recentSeatMap).
const recentFor = 4

// recentSeatMap is the schedule's seat map for a hold or a reservation:
// the current one while it is younger than recentFor × SnapshotEvery,
// without waiting for a rebuild that is due (reads, followers and the
// inventory count rebuild it), else SeatMap's. They need no fresher map:
// the hold store refuses held seats and the conditional UPDATE sold ones;
// the map only refuses early the seats it shows sold. So the rebuild of a
// large map never makes a hold wait.
func (s *Service) recentSeatMap(ctx context.Context, scheduleID int64) (*SeatMap, error) {
	s.mu.Lock()
	slot := s.maps[scheduleID]
	s.mu.Unlock()
	if slot != nil {
		slot.mu.Lock()
		m := slot.cur
		slot.mu.Unlock()
		if m != nil && s.cfg.Now().Sub(m.BuiltAt) < recentFor*s.cfg.SnapshotEvery {
			return m, nil
		}
	}
	return s.SeatMap(ctx, scheduleID)
}

func uniq(ids []int64) []int64 {
	c := slices.Clone(ids)
	slices.Sort(c)
	return slices.Compact(c)
}

// Hold holds seats of a schedule for visitor. Seats that are sold (as of
// the seat map) or held by someone else come back as a *hold.TakenError.
func (s *Service) Hold(ctx context.Context, scheduleID int64, visitor string, seats []int64) (hold.Hold, error) {
	m, err := s.checkSeats(ctx, scheduleID, seats)
	if err != nil {
		return hold.Hold{}, err
	}
	limit, err := s.buyerHoldLimit(ctx, scheduleID, visitor, int64(len(seats)), s.cfg.SeatLimit)
	if err != nil {
		s.metrics.held(kindSeats, err)
		return hold.Hold{}, err
	}
	h, err := s.holdSeats(ctx, m, scheduleID, visitor, seats, limit)
	s.metrics.held(kindSeats, err)
	return h, err
}

func (s *Service) holdSeats(ctx context.Context, m *SeatMap, scheduleID int64, visitor string, seats []int64, limit holdLimit) (hold.Hold, error) {
	var sold []string
	keys := make([]string, len(seats))
	for i, id := range seats {
		keys[i] = seatKey(id)
		if m.Seats[m.byID[id]].Status == booking.Sold || s.marked(scheduleID, soldSeats, id) {
			sold = append(sold, keys[i])
		}
	}
	if len(sold) > 0 {
		return hold.Hold{}, &hold.TakenError{Seats: sold}
	}
	h, err := s.cfg.Holds.HoldSeats(ctx, Scope(scheduleID), visitor, keys, limit.n, s.cfg.HoldTTL, s.cfg.Now())
	err = limit.explain(err)
	if err == nil {
		s.mark(scheduleID, heldSeats, seats, s.cfg.Now())
		s.emitHold(ctx, event.HoldPlaced, scheduleID, h)
	}
	return h, err
}

// Release ends one of visitor's holds early; another visitor's hold is
// hold.ErrNotFound.
func (s *Service) Release(ctx context.Context, scheduleID int64, visitor, holdID string) error {
	now := s.cfg.Now()
	h, err := s.cfg.Holds.Get(ctx, Scope(scheduleID), holdID, now)
	if err != nil {
		return err
	}
	if h.Holder != visitor {
		return fmt.Errorf("sale: release %s: %w", holdID, hold.ErrNotFound)
	}
	if err := s.cfg.Holds.Release(ctx, Scope(scheduleID), holdID, now); err != nil {
		return err
	}
	s.metrics.holdEnded("released")
	s.emitHold(ctx, event.HoldReleased, scheduleID, h)
	return nil
}

// maxIdempotencyKey is the longest idempotency key in bytes.
const maxIdempotencyKey = 128

// Lookup returns the reservation visitor submitted with idempotencyKey, or
// mq.ErrNotFound.
func (s *Service) Lookup(ctx context.Context, visitor, idempotencyKey string) (booking.Reservation, error) {
	return s.cfg.Broker.Lookup(ctx, visitor, idempotencyKey)
}

// Reserve submits a reservation of seats the visitor holds. The same
// (visitor, idempotency key) returns the first reservation (created false),
// even after its holds ended.
func (s *Service) Reserve(ctx context.Context, visitor string, scheduleID int64, seats []int64, idempotencyKey string) (booking.Reservation, bool, error) {
	if err := checkKey(idempotencyKey); err != nil {
		return booking.Reservation{}, false, err
	}
	if r, err := s.cfg.Broker.Lookup(ctx, visitor, idempotencyKey); err == nil {
		return r, false, nil
	} else if !errors.Is(err, mq.ErrNotFound) {
		return booking.Reservation{}, false, err
	}
	if _, err := s.checkSeats(ctx, scheduleID, seats); err != nil {
		return booking.Reservation{}, false, err
	}
	now := s.cfg.Now()
	var holdIDs, notHeld []string
	for _, id := range seats {
		h, err := s.cfg.Holds.Find(ctx, Scope(scheduleID), seatKey(id), now)
		switch {
		case errors.Is(err, hold.ErrNotFound) || (err == nil && h.Holder != visitor):
			notHeld = append(notHeld, seatKey(id))
		case err != nil:
			return booking.Reservation{}, false, err
		case !slices.Contains(holdIDs, h.ID):
			holdIDs = append(holdIDs, h.ID)
		}
	}
	if len(notHeld) > 0 {
		return booking.Reservation{}, false, &NotHeldError{Seats: notHeld}
	}
	if err := s.checkBuyer(ctx, scheduleID, visitor, int64(len(seats))); err != nil {
		return booking.Reservation{}, false, err
	}
	r := booking.Reservation{
		ID: newID(), Visitor: visitor, ScheduleID: scheduleID, SeatIDs: seats, HoldIDs: holdIDs,
		BuyerLimit: int64(s.cfg.BuyerLimit),
		Status:     booking.Pending, CreatedAt: now.UTC().Truncate(time.Microsecond), // SQL keeps µs
	}
	return s.submit(ctx, r, idempotencyKey)
}

// submit submits r to the broker and emits its event when it is new.
func (s *Service) submit(ctx context.Context, r booking.Reservation, idempotencyKey string) (booking.Reservation, bool, error) {
	got, created, err := s.metrics.submitted(s.cfg.Broker.Submit(ctx, r, idempotencyKey))
	if err == nil && created {
		s.emitSubmitted(ctx, got)
	}
	return got, created, err
}

// checkKey validates an idempotency key.
func checkKey(key string) error {
	if len(key) == 0 || len(key) > maxIdempotencyKey || !queue.ValidVisitorID(key) {
		return ErrInvalid.Detail("idempotency_key: want 1 to %d printable ASCII bytes without spaces", maxIdempotencyKey)
	}
	return nil
}

func newID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "r" + base64.RawURLEncoding.EncodeToString(b)
}

// Reservation returns one of visitor's reservations (another visitor's is
// mq.ErrNotFound). The broker knows every state; SQL is asked for a decided
// reservation the broker no longer has.
func (s *Service) Reservation(ctx context.Context, visitor, id string) (booking.Reservation, error) {
	r, err := s.Owner(ctx, id)
	if err != nil {
		return booking.Reservation{}, err
	}
	if r.Visitor != visitor {
		return booking.Reservation{}, fmt.Errorf("sale: reservation %s: %w", id, mq.ErrNotFound)
	}
	return r, nil
}

// Watch streams one of visitor's reservations until it is decided.
func (s *Service) Watch(ctx context.Context, visitor, id string) (<-chan booking.Reservation, error) {
	if _, err := s.Reservation(ctx, visitor, id); err != nil {
		return nil, err
	}
	return s.cfg.Broker.Watch(ctx, id)
}

// Run consumes reservations, keeps a waiting room for every schedule, and
// keeps each room's inventory (inventory.go), until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return s.cfg.Broker.Consume(ctx, mq.ConsumeOptions{
			Workers: s.cfg.Workers, MaxBatch: s.cfg.MaxBatch, RetryAfter: s.cfg.RetryAfter,
		}, s.decide)
	})
	g.Go(func() error { s.provisionRooms(ctx); return nil })
	if s.cfg.InventoryEvery > 0 {
		g.Go(func() error { s.keepInventory(ctx); return nil })
	}
	if s.cfg.Events != nil {
		g.Go(func() error { s.reportLapsed(ctx); return nil })
	}
	return g.Wait()
}

// provisionEvery is how often every schedule's room is checked.
const provisionEvery = 5 * time.Second

// provisionRooms creates the waiting room of every schedule that has none
// (with the default settings, open at once): a memory store starts empty at each start,
// and `usher seed` may add schedules beside a running server. Existing rooms
// are never changed.
//
// It is a loop of its own because its source is SQL (the schedules), which
// the queue's room discovery (queue.Queue.Run) does not read. It asks the
// store only about rooms missing from the queue's view, so a pass over
// provisioned schedules costs one SQL query and no store round trip.
func (s *Service) provisionRooms(ctx context.Context) {
	t := time.NewTicker(provisionEvery)
	defer t.Stop()
	for {
		schedules, err := s.cfg.Catalog.Schedules(ctx)
		for _, sch := range schedules {
			if _, ok := s.cfg.Queue.View(sch.Room); ok {
				continue
			}
			var created bool
			if created, err = s.cfg.Queue.EnsureRoom(ctx, sch.Room, queue.DefaultSettings()); err != nil {
				break
			} else if created {
				s.cfg.Logger.Info("created the waiting room of a schedule", "schedule", sch.ID, "room", sch.Room)
			}
		}
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("provision waiting rooms", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// decide is the consumer's handler: SQL decides the batch; then the holds
// of decided reservations end (consumed when confirmed, released when
// rejected) and confirmed visitors leave the active set, so the next visitor
// is admitted sooner (seed 001). A redelivered batch repeats only these
// idempotent follow-ups.
func (s *Service) decide(ctx context.Context, batch []booking.Reservation) ([]booking.Reservation, error) {
	start := time.Now()
	decided, err := s.cfg.Catalog.Decide(ctx, batch)
	s.metrics.decided(decided, time.Since(start), err)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	for i := range decided {
		decided[i].HoldIDs = batch[i].HoldIDs
		if decided[i].Status == booking.Confirmed {
			s.mark(decided[i].ScheduleID, soldSeats, decided[i].SeatIDs, now)
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, followUpConcurrency)
	for i := range decided {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s.followUp(ctx, &decided[i], now)
		})
	}
	wg.Wait()
	return decided, nil
}

// followUpConcurrency is how many decided reservations of a batch have
// their holds ended and slots freed at once.
const followUpConcurrency = 16

// What mark records of seats: sold or held by this instance.
const (
	soldSeats = iota
	heldSeats
)

// recent is the slot's record of seats of kind.
func (slot *seatMapSlot) recent(kind int) map[int64]time.Time {
	if kind == soldSeats {
		return slot.sold
	}
	return slot.held
}

// mark records seats this instance just saw sold, or held, so that Hold
// refuses the sold and best available passes over both before the next
// seat map rebuild shows them (which stays at most every SnapshotEvery).
func (s *Service) mark(scheduleID int64, kind int, seats []int64, at time.Time) {
	s.mu.Lock()
	slot := s.maps[scheduleID]
	s.mu.Unlock()
	if slot == nil {
		return
	}
	slot.mu.Lock()
	defer slot.mu.Unlock()
	m := slot.recent(kind)
	for _, id := range seats {
		m[id] = at
	}
}

// markedSeats returns the seats mark recorded, sold or held.
func (s *Service) markedSeats(scheduleID int64) map[int64]bool {
	s.mu.Lock()
	slot := s.maps[scheduleID]
	s.mu.Unlock()
	out := map[int64]bool{}
	if slot == nil {
		return out
	}
	slot.mu.Lock()
	defer slot.mu.Unlock()
	for _, recent := range []map[int64]time.Time{slot.sold, slot.held} {
		for id := range recent {
			out[id] = true
		}
	}
	return out
}

// marked reports whether mark recorded the seat as of kind.
func (s *Service) marked(scheduleID int64, kind int, seat int64) bool {
	s.mu.Lock()
	slot := s.maps[scheduleID]
	s.mu.Unlock()
	if slot == nil {
		return false
	}
	slot.mu.Lock()
	defer slot.mu.Unlock()
	_, ok := slot.recent(kind)[seat]
	return ok
}

// followUp ends a decided reservation's holds and, when it is confirmed,
// frees the visitor's active slot.
func (s *Service) followUp(ctx context.Context, r *booking.Reservation, now time.Time) {
	for _, id := range r.HoldIDs {
		end, how := s.cfg.Holds.Release, "returned"
		if r.Status == booking.Confirmed {
			end, how = s.cfg.Holds.Consume, "consumed"
		}
		var h hold.Hold
		if r.Status != booking.Confirmed && s.cfg.Events != nil {
			h, _ = s.cfg.Holds.Get(ctx, Scope(r.ScheduleID), id, now) // what the released event counts
		}
		err := end(ctx, Scope(r.ScheduleID), id, now)
		switch {
		case err == nil:
			s.metrics.holdEnded(how)
			if h.ID != "" {
				s.emitHold(ctx, event.HoldReleased, r.ScheduleID, h)
			}
		case err != nil && !errors.Is(err, hold.ErrNotFound):
			s.cfg.Logger.Warn("end hold", "hold", id, "reservation", r.ID, "err", err) // it expires anyway
		}
	}
	if r.Status != booking.Confirmed {
		return
	}
	sch, err := s.Schedule(ctx, r.ScheduleID)
	if err == nil {
		err = s.cfg.Queue.Leave(ctx, sch.Room, r.Visitor)
	}
	if err != nil && !errors.Is(err, queue.ErrRoomNotFound) {
		s.cfg.Logger.Warn("free active slot", "reservation", r.ID, "err", err) // it expires anyway
	}
}
