// Package hold keeps short-lived seat holds and general-admission stock in
// the fast store (memory or Redis) in front of SQL (seed 003 §4): a hold is
// SET NX with an expiry per seat, all seats of a request at once or none,
// and stock is an atomic check-and-decrement. Expired holds release
// themselves. Backends: memhold, redishold; conformance suite: holdtest.
//
// Holds are an optimisation, not the guarantee: if the store loses them
// (a Redis failover), SQL's conditional UPDATE still sells a seat once.
package hold

import (
	"context"
	"fmt"
	"strings"
	"time"

	"usher/internal/fault"
)

// Errors every Store returns (wrapped with operation context).
var (
	ErrNotFound = fault.New(fault.HoldNotFound, "hold not found")
	// ErrTaken: some seats are held by another hold; see *TakenError.
	ErrTaken = fault.New(fault.SeatsTaken, "seats already held")
	// ErrLimit: the holder would hold more than the limit.
	ErrLimit   = fault.New(fault.HoldLimit, "hold limit reached")
	ErrSoldOut = fault.New(fault.SoldOut, "sold out")
	// ErrUnavailable wraps any failure to reach the backend, a missed
	// deadline included.
	ErrUnavailable = fault.New(fault.Unavailable, "hold store unavailable")
)

// TakenError lists the seats that another hold already has.
type TakenError struct{ Seats []string }

func (e *TakenError) Error() string {
	return fmt.Sprintf("%v: %s", ErrTaken, strings.Join(e.Seats, ","))
}

// Unwrap makes errors.Is(err, ErrTaken) true and gives the error its code.
func (e *TakenError) Unwrap() error { return ErrTaken }

// FaultSeats shows the client the seats at fault (fault.Seats).
func (e *TakenError) FaultSeats() []string { return e.Seats }

// Hold is a set of seats (or a quantity of stock) held by one holder in one
// scope (a schedule) until ExpiresAt.
type Hold struct {
	ID     string
	Scope  string
	Holder string
	// Seats are the held seat ids, for a seat hold, in request order.
	Seats []string
	// Quantity is the number of stock units, for a stock hold (0 for seats).
	Quantity  int64
	ExpiresAt time.Time
}

// Store keeps holds. Every method is atomic on the backend. Scopes, holders
// and seat ids are non-empty strings without spaces of at most 128 bytes;
// the caller validates them. now is the caller's clock.
type Store interface {
	// HoldSeats holds every seat for holder until now+ttl, or none: when any
	// seat is held by another live hold it returns a *TakenError listing
	// those seats. A seat already held by the same holder is taken too (hold
	// it once). limit caps the seats one holder holds at once in the scope
	// (live seat holds counted), ErrLimit beyond it. The new hold gets a
	// random id.
	HoldSeats(ctx context.Context, scope, holder string, seats []string, limit int, ttl time.Duration, now time.Time) (Hold, error)
	// Get returns a live hold; ErrNotFound once it expired or was released.
	Get(ctx context.Context, scope, id string, now time.Time) (Hold, error)
	// Release ends a hold at once (its seats or stock come back).
	// ErrNotFound when it is not live.
	Release(ctx context.Context, scope, id string, now time.Time) error
	// Find returns the live hold that has seat; ErrNotFound when none has it.
	Find(ctx context.Context, scope, seat string, now time.Time) (Hold, error)
	// HeldSeats lists the seats under live holds in the scope, in no order.
	HeldSeats(ctx context.Context, scope string, now time.Time) ([]string, error)

	// SetStock sets the general-admission stock of scope to total units
	// available (not counting live holds).
	SetStock(ctx context.Context, scope string, total int64) error
	// HoldStock takes n units for holder until now+ttl with one atomic
	// check-and-decrement: ErrSoldOut when fewer than n remain, ErrLimit when
	// the holder's live stock holds would exceed limit units. Expired or
	// released stock holds return their units.
	HoldStock(ctx context.Context, scope, holder string, n, limit int64, ttl time.Duration, now time.Time) (Hold, error)
	// Stock returns the units left (expired holds returned).
	Stock(ctx context.Context, scope string, now time.Time) (int64, error)
	// Consume ends a live hold because its seats or units were sold: unlike
	// Release, stock units do not come back. ErrNotFound when not live.
	Consume(ctx context.Context, scope, id string, now time.Time) error

	// Lapsed removes and returns up to max of the scope's holds that ended
	// by expiring (not released or consumed), oldest expiry first: each
	// lapsed hold is returned once, to one caller, whichever instance
	// called. It first ends the holds expired at now, as every method does.
	// A store keeps at most MaxLapsed lapsed holds per scope that nobody
	// took yet, dropping the oldest beyond (holds whose expiry nobody
	// observes in time are not reported).
	Lapsed(ctx context.Context, scope string, now time.Time, max int) ([]Hold, error)
}

// MaxLapsed is the most lapsed holds a scope keeps for Lapsed.
const MaxLapsed = 10_000
