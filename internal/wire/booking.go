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
// (admin); Room defaults to schedule-<id>.
type ScheduleRequest struct {
	StartsAt time.Time `json:"starts_at"`
	Room     string    `json:"room"`
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
