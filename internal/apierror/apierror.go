// Package apierror is usher's one table from errors to HTTP statuses and
// stable JSON error codes, and the writer that answers every error as
// {"error":{"code":"…","message":"…"}}. The API server and the gate share it.
package apierror

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/booking"
	"usher/internal/hold"
	"usher/internal/mq"
	"usher/internal/queue"
	"usher/internal/sale"
	"usher/internal/token"
)

// Errors raised by the HTTP layer itself.
var (
	ErrNotFound         = errors.New("no such route")
	ErrMethodNotAllowed = errors.New("method not allowed")
	ErrBadJSON          = errors.New("malformed JSON body")
	ErrBodyTooLarge     = errors.New("body too large")
	ErrTokenMissing     = errors.New("token missing")
	ErrAdminOnly        = errors.New("admin key required")
)

// RetryAfter is the Retry-After (seconds) sent with every 503.
const RetryAfter = "2"

// codes is the table: the first entry that errors.Is matches wins. Messages
// of 4xx errors are shown to the client; 5xx clients see a fixed message.
var codes = []struct {
	err    error
	status int
	code   string
}{
	{queue.ErrInvalid, http.StatusBadRequest, "invalid_request"},
	{booking.ErrInvalid, http.StatusBadRequest, "invalid_request"},
	{sale.ErrInvalid, http.StatusBadRequest, "invalid_request"},
	{ErrBadJSON, http.StatusBadRequest, "bad_json"},
	{ErrBodyTooLarge, http.StatusRequestEntityTooLarge, "body_too_large"},
	{ErrTokenMissing, http.StatusUnauthorized, "token_missing"},
	{token.ErrExpired, http.StatusUnauthorized, "token_expired"},
	{token.ErrWrongRoom, http.StatusUnauthorized, "token_wrong_room"},
	{token.ErrInvalid, http.StatusUnauthorized, "token_invalid"},
	{ErrAdminOnly, http.StatusUnauthorized, "admin_unauthorized"},
	{queue.ErrNotAdmitted, http.StatusForbidden, "not_admitted"},
	{ErrNotFound, http.StatusNotFound, "not_found"},
	{queue.ErrRoomNotFound, http.StatusNotFound, "room_not_found"},
	{booking.ErrNotFound, http.StatusNotFound, "not_found"},
	{sale.ErrSeatUnknown, http.StatusNotFound, "seat_unknown"},
	{hold.ErrNotFound, http.StatusNotFound, "hold_not_found"},
	{mq.ErrNotFound, http.StatusNotFound, "reservation_not_found"},
	{ErrMethodNotAllowed, http.StatusMethodNotAllowed, "method_not_allowed"},
	{queue.ErrRoomClosed, http.StatusConflict, "room_closed"},
	{hold.ErrTaken, http.StatusConflict, "seats_taken"},
	{sale.ErrNotHeld, http.StatusConflict, "seats_not_held"},
	{hold.ErrLimit, http.StatusConflict, "hold_limit"},
	{hold.ErrSoldOut, http.StatusConflict, "sold_out"},
	{queue.ErrUnavailable, http.StatusServiceUnavailable, "unavailable"},
	{booking.ErrUnavailable, http.StatusServiceUnavailable, "unavailable"},
	{hold.ErrUnavailable, http.StatusServiceUnavailable, "unavailable"},
	{mq.ErrUnavailable, http.StatusServiceUnavailable, "unavailable"},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, "unavailable"},
}

// Status returns the HTTP status and code for err: 500 "internal" when the
// table has no entry.
func Status(err error) (int, string) {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.status, c.code
		}
	}
	return http.StatusInternalServerError, "internal"
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
}

// Write answers err with its status and code. 5xx errors are logged and
// their details hidden; 503 carries Retry-After.
func (wr Writer) Write(w http.ResponseWriter, r *http.Request, err error) {
	status, code := Status(err)
	var b Body
	b.Error.Code, b.Error.Message = code, err.Error()
	var taken *hold.TakenError
	var notHeld *sale.NotHeldError
	switch {
	case errors.As(err, &taken):
		b.Error.Seats = taken.Seats
	case errors.As(err, &notHeld):
		b.Error.Seats = notHeld.Seats
	}
	if status >= 500 {
		if wr.Log != nil {
			wr.Log.Error("request failed", "method", r.Method, "path", r.URL.Path, "code", code, "err", err)
		}
		b.Error.Message = http.StatusText(status)
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", RetryAfter)
			b.Error.Message = "a backend is unavailable; retry later"
		}
	}
	if wr.Counts != nil {
		wr.Counts.WithLabelValues(code).Inc()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(b)
}
