// Package fault gives usher's errors a stable code and a message fit for a
// client. It has no dependencies beyond the standard library, so every
// domain package (queue, booking, hold, mq, sale, token) builds its sentinel
// errors from it, and the HTTP edge maps codes to statuses without importing
// any domain.
//
// The contract:
//   - A sentinel is a *Error made once with New: errors.Is(err, sentinel)
//     holds for every error that wraps it, whatever the backend.
//   - Code(err) and Message(err) read the outermost *Error in err's chain:
//     fixed text, the same on every backend; wrapping context stays in
//     err.Error() for the logs. Detail adds a detail the domain may show.
//   - An error without a *Error in its chain has no code: the edge treats it
//     as internal.
package fault

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Codes are the stable JSON error codes clients depend on; never rename one.
const (
	Invalid             = "invalid_request"
	BadJSON             = "bad_json"
	BodyTooLarge        = "body_too_large"
	TokenMissing        = "token_missing"
	TokenExpired        = "token_expired"
	TokenWrongRoom      = "token_wrong_room"
	TokenInvalid        = "token_invalid"
	AdminOnly           = "admin_unauthorized"
	NotAdmitted         = "not_admitted"
	NotFound            = "not_found"
	RoomNotFound        = "room_not_found"
	DrawNotFound        = "draw_not_found"
	SeatUnknown         = "seat_unknown"
	HoldNotFound        = "hold_not_found"
	ReservationNotFound = "reservation_not_found"
	MethodNotAllowed    = "method_not_allowed"
	RoomClosed          = "room_closed"
	QueueFull           = "queue_full"
	SeatsTaken          = "seats_taken"
	SeatsNotHeld        = "seats_not_held"
	HoldLimit           = "hold_limit"
	BuyerLimit          = "buyer_limit"
	SoldOut             = "sold_out"
	Unavailable         = "unavailable"
	BadPath             = "bad_path"
	HostNotServed       = "host_not_served"
	RateLimited         = "rate_limited"
	ChallengeNeeded     = "challenge_required"
	ChallengeInvalid    = "challenge_invalid"
	IdentityRequired    = "identity_required"
	IdentityInvalid     = "identity_invalid"
	InviteRequired      = "invite_required"
	LaneCodeUsed        = "lane_code_used"
	LanesOff            = "lanes_off"
	RoomInUse           = "room_in_use"
	RoomOfSchedule      = "room_of_schedule"
	CSRFRefused         = "csrf_refused"
	AnalyticsDisabled   = "analytics_disabled"
	Internal            = "internal"
)

// Error is an error with a stable code and a client-safe message.
type Error struct {
	// Code is one of the codes above.
	Code string
	// Message is fixed text for the client: never a backend's words.
	Message string
	// of is the sentinel a Detail error belongs to; nil for a sentinel.
	of *Error
}

// New returns a sentinel error.
func New(code, message string) *Error { return &Error{Code: code, Message: message} }

// Error returns the message; for a Detail error, the sentinel's message and
// the detail ("invalid input: max_active: want 1 to 100000").
func (e *Error) Error() string {
	if e.of != nil {
		return e.of.Message + ": " + e.Message
	}
	return e.Message
}

// Unwrap makes errors.Is(detail, sentinel) hold.
func (e *Error) Unwrap() error {
	if e.of == nil {
		return nil
	}
	return e.of
}

// Detail returns an error that is e (same code, errors.Is holds) whose client
// message is the formatted detail. Use it for details the client needs and
// may see (the field a validator refused); never format a backend's error
// into it.
func (e *Error) Detail(format string, args ...any) *Error {
	return &Error{Code: e.Code, Message: fmt.Sprintf(format, args...), of: e}
}

// Code returns the code of the outermost *Error in err's chain, or "" when
// there is none.
func Code(err error) string {
	if f, ok := errors.AsType[*Error](err); ok {
		return f.Code
	}
	return ""
}

// Message returns the client message of the outermost *Error in err's
// chain, or "" when there is none.
func Message(err error) string {
	if f, ok := errors.AsType[*Error](err); ok {
		return f.Message
	}
	return ""
}

// Seats is implemented by errors that name the seats at fault
// (seats_taken, seats_not_held): a detail the domain deliberately shows.
type Seats interface {
	error
	FaultSeats() []string
}

// Challenged is implemented by errors that hand the client a challenge to
// solve before it retries (challenge_required): the answer carries it as
// the top-level "challenge" field.
type Challenged interface {
	error
	FaultChallenge() any
}

// Delayed is implemented by errors that know when a retry may succeed
// (rate_limited): the answer's Retry-After says so.
type Delayed interface {
	error
	FaultRetryAfter() time.Duration
}

// Bounded runs f under a deadline of d and returns its result; an error
// from a call that missed the deadline is unavailable (wrapping both),
// whatever the backend returned. The store wrappers that set per-call
// deadlines (queue.WithTimeout, hold.WithTimeout) call it, so a hung store
// is an outage on every one.
func Bounded[T any](ctx context.Context, d time.Duration, unavailable error, op string, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	v, err := f(ctx)
	if err != nil && !errors.Is(err, unavailable) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("%s: %w: %w", op, unavailable, err)
	}
	return v, err
}
