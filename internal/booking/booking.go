// Package booking is the catalog behind the waiting room: concerts, their
// schedules, the seats of each schedule, and reservations, kept in SQL (the
// Store interface; backends sqlitebooking and pgbooking).
//
// SQL is the last line of defence against selling a seat twice (seed 003
// §6): Decide confirms a reservation only through a conditional UPDATE of
// every one of its seats in one transaction, whatever the hold layer in
// front of it believed.
package booking

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"usher/internal/fault"
)

// Errors every Store returns (wrapped with operation context).
var (
	ErrNotFound = fault.New(fault.NotFound, "not found")
	// ErrInvalid: input the database refuses (a constraint); the client sees
	// only this fixed text, never the constraint.
	ErrInvalid = fault.New(fault.Invalid, "invalid input")
	// ErrUnavailable wraps any failure to reach the database.
	ErrUnavailable = fault.New(fault.Unavailable, "database unavailable")
)

// Details of ErrInvalid that every backend returns for the constraints a
// client can run into, so that the client reads the same words whatever the
// database (never the constraint's own text).
var (
	// ErrBelowSold: a stock total below the units already sold (the CHECK).
	ErrBelowSold = ErrInvalid.Detail("total: below the units already sold")
	// ErrSeatExists: a seat the schedule already has (the UNIQUE key).
	ErrSeatExists = ErrInvalid.Detail("seats: the schedule already has one of them")
)

// Refused returns err with detail as its client message when err is plain
// ErrInvalid (a constraint the database enforced); other errors, and
// ErrInvalid already detailed by a validator, unchanged.
func Refused(err, detail error) error {
	if f, ok := errors.AsType[*fault.Error](err); ok && f == ErrInvalid {
		return fmt.Errorf("%w: %w", detail, err)
	}
	return err
}

// SeatStatus is a seat's state in SQL. Holds live in the hold store; SQL
// knows AVAILABLE and SOLD (HELD is accepted by Decide's condition so that a
// deployment that marks holds in SQL stays correct).
type SeatStatus string

const (
	Available SeatStatus = "AVAILABLE"
	Held      SeatStatus = "HELD"
	Sold      SeatStatus = "SOLD"
)

// Concert is an event with one or more schedules.
type Concert struct {
	ID        int64     `json:"concert_id"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"created_at"`
}

// Schedule is one performance of a concert. Room is the waiting room that
// gates it (default "schedule-<id>").
type Schedule struct {
	ID        int64     `json:"schedule_id"`
	ConcertID int64     `json:"concert_id"`
	StartsAt  time.Time `json:"starts_at"`
	Room      string    `json:"room"`
}

// SeatSpec describes a seat to create.
type SeatSpec struct {
	Section string `json:"section"`
	Row     string `json:"row"`
	Number  int    `json:"number"`
	// Price in minor units of the currency (e.g. won, cents).
	Price int64 `json:"price"`
}

// Seat is a seat of a schedule.
type Seat struct {
	ID         int64 `json:"seat_id"`
	ScheduleID int64 `json:"-"`
	SeatSpec
	Status        SeatStatus `json:"status"`
	ReservationID string     `json:"-"`
}

// SeatState is a seat's id and status in SQL.
type SeatState struct {
	ID     int64
	Status SeatStatus
}

// SeatStater is what a Store may offer beside Seats to a caller that has
// a schedule's layout already (the seat-map rebuild): how many seats the
// schedule has, and the id and status of those not AVAILABLE, ordered by
// id; ErrNotFound for an unknown schedule. Seats are never removed and
// their specs never change, so a count equal to the caller's says its
// layout is current. At 50,000 seats it reads a few ids where Seats reads
// every seat's section, row, number and price.
type SeatStater interface {
	SeatStates(ctx context.Context, scheduleID int64) (total int, taken []SeatState, err error)
}

// ReservationStatus is where a reservation stands.
type ReservationStatus string

const (
	Pending   ReservationStatus = "pending"
	Confirmed ReservationStatus = "confirmed"
	Rejected  ReservationStatus = "rejected"
)

// Rejection reasons.
const (
	ReasonSeatTaken   = "seat_taken"   // a seat was sold to another reservation
	ReasonSeatUnknown = "seat_unknown" // a seat does not exist in the schedule
	// ReasonSoldOut: the schedule's general-admission stock has fewer units
	// left than the quantity (or the schedule has no stock), or the
	// reservation is malformed (a quantity below 0, or seats and a quantity
	// at once).
	ReasonSoldOut = "sold_out"
	// ReasonBuyerLimit: the visitor's tickets for the schedule would exceed
	// the reservation's BuyerLimit.
	ReasonBuyerLimit = "buyer_limit"
)

// Stock is a schedule's general-admission stock (units without seat
// numbers): Total units for sale, Sold of them sold by Decide.
type Stock struct {
	Total int64 `json:"total"`
	Sold  int64 `json:"sold"`
}

// Reservation is a request to buy seats of one schedule, or a quantity of
// its general-admission stock, and its outcome. A reservation has either
// seats or a quantity, not both.
type Reservation struct {
	ID         string  `json:"reservation_id"`
	Visitor    string  `json:"visitor"`
	ScheduleID int64   `json:"schedule_id"`
	SeatIDs    []int64 `json:"seat_ids"`
	// Quantity is the number of stock units, for a stock reservation (0 for
	// seats).
	Quantity int64 `json:"quantity,omitempty"`
	// HoldIDs are the holds that covered the seats when the reservation was
	// submitted; the consumer ends them once it is decided. Not stored in SQL.
	HoldIDs []string `json:"hold_ids,omitempty"`
	// BuyerLimit, above 0, is the most tickets (seats or units) the
	// Visitor may buy of the schedule across its confirmed reservations,
	// this one included (Decide). Not stored with the decision.
	BuyerLimit int64             `json:"buyer_limit,omitempty"`
	Status     ReservationStatus `json:"status"`
	Reason     string            `json:"reason,omitempty"`
	CreatedAt  time.Time         `json:"created_at"`
	DecidedAt  time.Time         `json:"decided_at,omitzero"`
}

// Store keeps the catalog and decided reservations in SQL. Methods wrap
// ErrNotFound for unknown ids and ErrUnavailable for database faults.
type Store interface {
	CreateConcert(ctx context.Context, title string) (Concert, error)
	// CreateSchedule creates a schedule of an existing concert; an empty
	// Room becomes "schedule-<id>".
	CreateSchedule(ctx context.Context, s Schedule) (Schedule, error)
	// AddSeats creates seats (AVAILABLE) in bulk and returns their ids in
	// order. A (section, row, number) already present in the schedule is
	// ErrInvalid and nothing is added.
	AddSeats(ctx context.Context, scheduleID int64, seats []SeatSpec) ([]int64, error)
	Schedule(ctx context.Context, id int64) (Schedule, error)
	// Schedules lists every schedule ordered by id.
	Schedules(ctx context.Context) ([]Schedule, error)
	// Seats lists a schedule's seats ordered by id.
	Seats(ctx context.Context, scheduleID int64) ([]Seat, error)
	// Decide applies pending reservations and returns them decided, in the
	// same order. Each is all or nothing: in one transaction, every seat is
	// sold with UPDATE … SET status='SOLD', reservation_id=… WHERE
	// schedule_id=… AND seat_id=… AND status IN ('AVAILABLE','HELD'); if any
	// update touches no row the reservation is Rejected (ReasonSeatTaken, or
	// ReasonSeatUnknown) and none of its seats change. The decision is
	// stored with the reservation. Deciding an already decided reservation
	// (a redelivery) changes nothing and returns the stored decision. One
	// call may batch many reservations into few round trips; it uses at most
	// one connection.
	//
	// A reservation with a Quantity buys stock instead, in the same
	// transaction: UPDATE stock SET sold = sold + quantity WHERE
	// schedule_id=… AND sold + quantity <= total; no row touched means
	// Rejected with ReasonSoldOut (so does a quantity below 0, or seats and
	// a quantity at once). It is stored and redelivered like any other.
	//
	// A reservation with a BuyerLimit also counts its tickets (seats or
	// units) to its visitor for the schedule, in the same transaction, with
	// a conditional UPDATE of the visitor's count (tickets + n <= limit):
	// no row touched means Rejected with ReasonBuyerLimit and nothing
	// sold. A reservation rejected for any reason counts nothing.
	//
	// Each decision it stores writes its event (reservation_confirmed or
	// reservation_rejected, OutboxEvent) into the outbox in the same
	// transaction: a decision rolled back leaves no event, a stored one
	// has exactly one, and a redelivery writes none.
	Decide(ctx context.Context, rs []Reservation) ([]Reservation, error)
	// SetStock creates a schedule's general-admission stock or sets its
	// total: ErrNotFound for an unknown schedule, ErrInvalid when total is
	// below 0 or below the units already sold.
	SetStock(ctx context.Context, scheduleID, total int64) error
	// Stock returns a schedule's stock; ErrNotFound when it has none.
	Stock(ctx context.Context, scheduleID int64) (Stock, error)
	// BuyerTickets returns the tickets Decide counted to visitor for the
	// schedule (confirmed reservations that carried a BuyerLimit); 0 for
	// none.
	BuyerTickets(ctx context.Context, scheduleID int64, visitor string) (int64, error)
	// Reservation returns a decided reservation.
	Reservation(ctx context.Context, id string) (Reservation, error)

	// The operator's reads (lists.go). Each list returns at most limit rows
	// (ErrInvalid below 1) after the cursor, in a stable order: a list read
	// again from the last row's key continues where the first stopped,
	// whatever was added meanwhile.

	// Concert returns a concert.
	Concert(ctx context.Context, id int64) (Concert, error)
	// ListConcerts lists the concerts whose id is above after, by id.
	ListConcerts(ctx context.Context, after int64, limit int) ([]Concert, error)
	// ListSchedules lists the schedules whose id is above after, by id;
	// concertID > 0 keeps only that concert's (none for an unknown one).
	ListSchedules(ctx context.Context, concertID, after int64, limit int) ([]Schedule, error)
	// ListReservations lists a schedule's decided reservations whose id is
	// above after in byte order, by id in byte order (whatever the
	// database's collation); status "" keeps every status. Pending
	// reservations are in the broker, not in SQL: none is listed.
	ListReservations(ctx context.Context, scheduleID int64, status ReservationStatus, after string, limit int) ([]Reservation, error)

	// The outbox (outbox.go): events written with the decisions, waiting
	// for the relay to publish them.

	// Outbox returns up to limit unsent events (ErrInvalid below 1), the
	// oldest first (by Seq).
	Outbox(ctx context.Context, limit int) ([]OutboxEvent, error)
	// MarkSent removes the outbox events with these Seqs: they were
	// published. Seqs not in the outbox (removed already) are ignored.
	MarkSent(ctx context.Context, seqs []int64) error

	// Close releases the connections.
	Close() error
}

// CheckLimit refuses a list limit below 1 with ErrInvalid.
func CheckLimit(limit int) error {
	if limit < 1 {
		return ErrInvalid.Detail("limit: want 1 or more")
	}
	return nil
}

// CheckSeatSpecs refuses a (section, row, number) that appears twice in one
// AddSeats call with ErrInvalid; backends refuse one already stored with a
// UNIQUE constraint.
func CheckSeatSpecs(seats []SeatSpec) error {
	type key struct {
		section, row string
		number       int
	}
	seen := make(map[key]bool, len(seats))
	for _, seat := range seats {
		k := key{seat.Section, seat.Row, seat.Number}
		if seen[k] {
			return ErrInvalid.Detail("seat %q row %q number %d: listed twice", seat.Section, seat.Row, seat.Number)
		}
		seen[k] = true
	}
	return nil
}

// Tickets is the number of tickets r buys: its seats, or its quantity.
func Tickets(r Reservation) int64 {
	if r.Quantity != 0 {
		return r.Quantity
	}
	return int64(len(r.SeatIDs))
}

// Malformed returns the rejection reason of a seat list that no sale can
// satisfy: none (ReasonSeatUnknown), or a seat twice (ReasonSeatTaken: its
// second conditional UPDATE would touch no row); "" for a sound one.
func Malformed(seats []int64) string {
	if len(seats) == 0 {
		return ReasonSeatUnknown
	}
	sorted := slices.Clone(seats)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) < len(seats) {
		return ReasonSeatTaken
	}
	return ""
}
