// Package apierror is usher's one table from error codes to HTTP statuses,
// and the writer that answers every error as
// {"error":{"code":"…","message":"…"[,"seats":[…]]}}. The API server, the gate
// and the proxy share it.
//
// It imports no domain package: errors carry their code and client message
// (package fault), and the table maps codes to statuses. The client sees the
// code's fixed message (or the safe detail a validator chose), never the
// wrapped chain; the Writer logs the whole chain of every 5xx, and of 4xx at
// debug level.
package apierror

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/fault"
)

// Errors raised by the HTTP layer itself.
var (
	ErrNotFound         = fault.New(fault.NotFound, "no such route")
	ErrMethodNotAllowed = fault.New(fault.MethodNotAllowed, "method not allowed")
	ErrBadJSON          = fault.New(fault.BadJSON, "malformed JSON body")
	ErrBodyTooLarge     = fault.New(fault.BodyTooLarge, "body too large")
	ErrTokenMissing     = fault.New(fault.TokenMissing, "token missing")
	ErrAdminOnly        = fault.New(fault.AdminOnly, "admin key required (send it as Authorization: Bearer <key>)")
	// ErrAdminKeyWrong has ErrAdminOnly's code: a bearer token was sent,
	// and it is not the admin key.
	ErrAdminKeyWrong = fault.New(fault.AdminOnly, "wrong admin key (the bearer token sent is not this server's admin key)")
)

// RetryAfter is the Retry-After (seconds) sent with every 503.
const RetryAfter = "2"

// UnavailableMessage is the client message of every 503: which backend
// failed, and how, is only logged.
const UnavailableMessage = "a backend is unavailable; retry later"

// statuses is the table: every code a fault.Error may carry, and its status.
// A code missing here is a bug: Status answers 500 internal.
var statuses = map[string]int{
	fault.Invalid:             http.StatusBadRequest,
	fault.BadJSON:             http.StatusBadRequest,
	fault.BodyTooLarge:        http.StatusRequestEntityTooLarge,
	fault.TokenMissing:        http.StatusUnauthorized,
	fault.TokenExpired:        http.StatusUnauthorized,
	fault.TokenWrongRoom:      http.StatusUnauthorized,
	fault.TokenInvalid:        http.StatusUnauthorized,
	fault.AdminOnly:           http.StatusUnauthorized,
	fault.NotAdmitted:         http.StatusForbidden,
	fault.NotFound:            http.StatusNotFound,
	fault.RoomNotFound:        http.StatusNotFound,
	fault.DrawNotFound:        http.StatusNotFound,
	fault.SeatUnknown:         http.StatusNotFound,
	fault.HoldNotFound:        http.StatusNotFound,
	fault.ReservationNotFound: http.StatusNotFound,
	fault.MethodNotAllowed:    http.StatusMethodNotAllowed,
	fault.RoomClosed:          http.StatusConflict,
	fault.SeatsTaken:          http.StatusConflict,
	fault.SeatsNotHeld:        http.StatusConflict,
	fault.HoldLimit:           http.StatusConflict,
	fault.BuyerLimit:          http.StatusConflict,
	fault.SoldOut:             http.StatusConflict,
	fault.Unavailable:         http.StatusServiceUnavailable,
	fault.BadPath:             http.StatusBadRequest,
	fault.HostNotServed:       http.StatusMisdirectedRequest,
	fault.RateLimited:         http.StatusTooManyRequests,
	fault.QueueFull:           http.StatusTooManyRequests,
	fault.ChallengeNeeded:     http.StatusPreconditionRequired,
	fault.ChallengeInvalid:    http.StatusUnauthorized,
	fault.IdentityRequired:    http.StatusUnauthorized,
	fault.IdentityInvalid:     http.StatusUnauthorized,
	fault.InviteRequired:      http.StatusForbidden,
	fault.LaneCodeUsed:        http.StatusGone,
	fault.LanesOff:            http.StatusConflict,
	fault.RoomInUse:           http.StatusConflict,
	fault.RoomOfSchedule:      http.StatusConflict,
	fault.CSRFRefused:         http.StatusForbidden,
	fault.AnalyticsDisabled:   http.StatusNotFound,
}

// Codes returns a copy of the table: every error code and its status (the
// OpenAPI document's tests compare it with the codes the document lists).
func Codes() map[string]int {
	out := make(map[string]int, len(statuses)+1)
	for code, status := range statuses {
		out[code] = status
	}
	out[fault.Internal] = http.StatusInternalServerError
	return out
}

// Status returns the HTTP status and code for err: the code of the outermost
// fault.Error in its chain; 503 "unavailable" for a missed deadline without
// one; 500 "internal" otherwise.
func Status(err error) (int, string) {
	code := fault.Code(err)
	if code == "" && errors.Is(err, context.DeadlineExceeded) {
		code = fault.Unavailable
	}
	if status, ok := statuses[code]; ok {
		return status, code
	}
	return http.StatusInternalServerError, fault.Internal
}

// Writer answers errors. Its zero value logs nothing and counts nothing.
type Writer struct {
	Log    *slog.Logger
	Counts *prometheus.CounterVec // labelled by code; may be nil
}

// NewCounts registers usher_http_errors_total{code} with reg.
func NewCounts(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "usher_http_errors_total", Help: "Error responses by JSON error code.",
	}, []string{"code"})
	reg.MustRegister(c)
	return c
}

// Body is the JSON shape of every error response. Seats lists the seats at
// fault for seats_taken and seats_not_held.
type Body struct {
	Error struct {
		Code    string   `json:"code"`
		Message string   `json:"message"`
		Seats   []string `json:"seats,omitempty"`
	} `json:"error"`
	// Challenge is the proof-of-work challenge of challenge_required.
	Challenge any `json:"challenge,omitempty"`
}

// bodyFor returns the answer to err and its status: the code's fixed
// message (or the safe detail of a fault.Error), the seats of a fault.Seats
// error; 5xx answers show only a fixed text.
func bodyFor(err error) (int, Body) {
	status, code := Status(err)
	var b Body
	b.Error.Code, b.Error.Message = code, fault.Message(err)
	if s, ok := errors.AsType[fault.Seats](err); ok {
		b.Error.Seats = s.FaultSeats()
	}
	if c, ok := errors.AsType[fault.Challenged](err); ok {
		b.Challenge = c.FaultChallenge()
	}
	switch {
	case status == http.StatusServiceUnavailable:
		b.Error.Message = UnavailableMessage
	case status >= 500:
		b.Error.Message, b.Error.Seats = http.StatusText(status), nil
	}
	return status, b
}

// RetryAfterFor is the Retry-After (whole seconds, at least 1) to send
// with err: the delay a fault.Delayed error names, else RetryAfter.
func RetryAfterFor(err error) string {
	if d, ok := errors.AsType[fault.Delayed](err); ok {
		return strconv.Itoa(max(1, int((d.FaultRetryAfter()+time.Second-1)/time.Second)))
	}
	return RetryAfter
}

// StatusClientClosed is the status recorded (as nginx's 499) for a request
// whose client hung up before the answer: nobody reads it.
const StatusClientClosed = 499

// ClientGone reports whether err is the cancellation of r by its client:
// r's context ended and err carries context.Canceled.
func ClientGone(r *http.Request, err error) bool {
	return errors.Is(err, context.Canceled) && errors.Is(r.Context().Err(), context.Canceled)
}

// Write answers err with its status, code and client message. It logs the
// whole error chain: 5xx at error level, 4xx at debug level. 503 and 429
// carry Retry-After: the caller's, if it set one, else RetryAfterFor(err).
// A request its client hung up on (ClientGone) is no failure of usher's:
// it is logged at debug level, counted under no code, and answered
// StatusClientClosed without a body.
func (wr Writer) Write(w http.ResponseWriter, r *http.Request, err error) {
	if ClientGone(r, err) {
		if wr.Log != nil {
			wr.Log.Debug("client went away", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		w.WriteHeader(StatusClientClosed)
		return
	}
	status, b := bodyFor(err)
	if wr.Log != nil {
		level := slog.LevelDebug
		if status >= 500 {
			level = slog.LevelError
		}
		wr.Log.Log(r.Context(), level, "request failed", "method", r.Method, "path", r.URL.Path, "code", b.Error.Code, "err", err)
	}
	if (status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests) && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", RetryAfterFor(err))
	}
	if wr.Counts != nil {
		wr.Counts.WithLabelValues(b.Error.Code).Inc()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(b)
}
