package wire

import "time"

// The booking API's request and answer bodies that are not a domain type
// served as is (concerts, schedules, seat maps and the admin's stock level
// are the booking and sale packages' own JSON).

// HoldRequest is the body of POST /api/v1/schedules/{id}/holds: seats or,
// with a quantity, general-admission stock; exactly one of the two.
type HoldRequest struct {
	SeatIDs  []int64 `json:"seat_ids"`
	Quantity *int64  `json:"quantity"`
	// Count asks for the best Count adjacent seats (best available), in
	// Section and priced from MinPrice to MaxPrice when they are set.
	Count    *int   `json:"count"`
	Section  string `json:"section,omitempty"`
	MinPrice int64  `json:"min_price,omitempty"`
	MaxPrice int64  `json:"max_price,omitempty"`
}

// Hold is a hold as the API shows it: seats, or a quantity of stock.
type Hold struct {
	HoldID     string    `json:"hold_id"`
	ScheduleID int64     `json:"schedule_id"`
	SeatIDs    []int64   `json:"seat_ids,omitempty"`
	Quantity   int64     `json:"quantity,omitempty"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// ReserveRequest is the body of POST /api/v1/reservations: held seats or,
// with a hold id, the units of a stock hold; exactly one of the two.
type ReserveRequest struct {
	ScheduleID     int64   `json:"schedule_id"`
	SeatIDs        []int64 `json:"seat_ids"`
	HoldID         string  `json:"hold_id"`
	IdempotencyKey string  `json:"idempotency_key"`
}

// Reservation is a reservation as the API shows it: of seats, or of a
// quantity of stock. Status is pending, confirmed or rejected; Reason says
// why a rejected one was.
type Reservation struct {
	ReservationID string    `json:"reservation_id"`
	ScheduleID    int64     `json:"schedule_id"`
	SeatIDs       []int64   `json:"seat_ids,omitempty"`
	Quantity      int64     `json:"quantity,omitempty"`
	Status        string    `json:"status"`
	Reason        string    `json:"reason,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	DecidedAt     time.Time `json:"decided_at,omitzero"`
}

// ConcertRequest is the body of POST /api/v1/concerts (admin).
type ConcertRequest struct {
	Title string `json:"title"`
}

// ScheduleRequest is the body of POST /api/v1/concerts/{id}/schedules
// (admin); Room defaults to schedule-<id>. StartsAt is the show's time;
// SaleOpensAt, when set and still to come, is the opening of a new room
// (its opens_at); without it the new room opens at once.
type ScheduleRequest struct {
	StartsAt    time.Time `json:"starts_at"`
	Room        string    `json:"room"`
	SaleOpensAt time.Time `json:"sale_opens_at,omitzero"`
}

// StockRequest is the body of PUT /api/v1/schedules/{id}/stock (admin).
type StockRequest struct {
	Total *int64 `json:"total"`
}

// Stock is a schedule's stock as visitors see it: the units left for
// holding (GET /api/v1/schedules/{id}/stock).
type Stock struct {
	ScheduleID int64 `json:"schedule_id"`
	Available  int64 `json:"available"`
}

// Concert is a concert as the API shows it (GET /api/v1/concerts…).
type Concert struct {
	ConcertID int64     `json:"concert_id"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"created_at"`
}

// Schedule is a schedule as the API shows it (GET /api/v1/schedules…).
type Schedule struct {
	ScheduleID int64     `json:"schedule_id"`
	ConcertID  int64     `json:"concert_id"`
	StartsAt   time.Time `json:"starts_at"`
	Room       string    `json:"room"`
}

// The paged lists: one page in id order, and Next, the opaque cursor of
// the next page (?after=<next>), absent on the last page.

// ConcertList is the answer of GET /api/v1/concerts.
type ConcertList struct {
	Concerts []Concert `json:"concerts"`
	Next     string    `json:"next,omitempty"`
}

// ScheduleList is the answer of GET /api/v1/schedules.
type ScheduleList struct {
	Schedules []Schedule `json:"schedules"`
	Next      string     `json:"next,omitempty"`
}

// ReservationList is the answer of GET /api/v1/schedules/{id}/reservations
// (admin): decided reservations, with their visitors.
type ReservationList struct {
	Reservations []AdminReservation `json:"reservations"`
	Next         string             `json:"next,omitempty"`
}

// AdminReservation is a reservation as the admin key reads it: with the
// visitor who made it.
type AdminReservation struct {
	Reservation
	Visitor string `json:"visitor"`
}

// Sales is the answer of GET /api/v1/schedules/{id}/sales: the schedule's
// units sold, held and available, seats and general-admission stock
// together, then each apart (Seats absent without seats, Stock without
// stock). Revenue is the price of the seats sold, in minor units (stock
// units have no price); absent without seats. AsOf is when the seat map
// counted was built.
type Sales struct {
	ScheduleID int64       `json:"schedule_id"`
	Room       string      `json:"room"`
	Sold       int64       `json:"sold"`
	Held       int64       `json:"held"`
	Available  int64       `json:"available"`
	Revenue    *int64      `json:"revenue,omitempty"`
	Seats      *SalesCount `json:"seats,omitempty"`
	Stock      *SalesCount `json:"stock,omitempty"`
	AsOf       time.Time   `json:"as_of"`
}

// SalesCount is one kind of unit's count in Sales.
type SalesCount struct {
	Total     int64  `json:"total"`
	Sold      int64  `json:"sold"`
	Held      int64  `json:"held"`
	Available int64  `json:"available"`
	Revenue   *int64 `json:"revenue,omitempty"`
}
