package apierror_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/apierror"
	"usher/internal/booking"
	"usher/internal/fault"
	"usher/internal/hold"
	"usher/internal/mq"
	"usher/internal/queue"
	"usher/internal/sale"
	"usher/internal/token"
)

// TestEveryDomainError pins the status and the stable code of every
// sentinel error, wrapped as a backend wraps it: the table knows no domain,
// so a sentinel with a code missing from it would answer 500.
func TestEveryDomainError(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{queue.ErrInvalid, 400, "invalid_request"},
		{booking.ErrInvalid, 400, "invalid_request"},
		{sale.ErrInvalid, 400, "invalid_request"},
		{apierror.ErrBadJSON, 400, "bad_json"},
		{apierror.ErrBodyTooLarge, 413, "body_too_large"},
		{apierror.ErrTokenMissing, 401, "token_missing"},
		{token.ErrExpired, 401, "token_expired"},
		{token.ErrWrongRoom, 401, "token_wrong_room"},
		{token.ErrInvalid, 401, "token_invalid"},
		{apierror.ErrAdminOnly, 401, "admin_unauthorized"},
		{queue.ErrNotAdmitted, 403, "not_admitted"},
		{apierror.ErrNotFound, 404, "not_found"},
		{queue.ErrRoomNotFound, 404, "room_not_found"},
		{booking.ErrNotFound, 404, "not_found"},
		{sale.ErrSeatUnknown, 404, "seat_unknown"},
		{hold.ErrNotFound, 404, "hold_not_found"},
		{mq.ErrNotFound, 404, "reservation_not_found"},
		{apierror.ErrMethodNotAllowed, 405, "method_not_allowed"},
		{queue.ErrRoomClosed, 409, "room_closed"},
		{hold.ErrTaken, 409, "seats_taken"},
		{&hold.TakenError{Seats: []string{"7"}}, 409, "seats_taken"},
		{sale.ErrNotHeld, 409, "seats_not_held"},
		{&sale.NotHeldError{Seats: []string{"7"}}, 409, "seats_not_held"},
		{hold.ErrLimit, 409, "hold_limit"},
		{sale.ErrBuyerLimit, 409, "buyer_limit"},
		{hold.ErrSoldOut, 409, "sold_out"},
		{queue.ErrUnavailable, 503, "unavailable"},
		{booking.ErrUnavailable, 503, "unavailable"},
		{hold.ErrUnavailable, 503, "unavailable"},
		{mq.ErrUnavailable, 503, "unavailable"},
		{context.DeadlineExceeded, 503, "unavailable"},
		{errors.New("boom"), 500, "internal"},
	} {
		wrapped := fmt.Errorf("somebackend: op /var/lib/x.db: %w: UNIQUE constraint failed", tc.err)
		status, code := apierror.Status(wrapped)
		if status != tc.status || code != tc.code {
			t.Errorf("Status(%v) = %d %s, want %d %s", wrapped, status, code, tc.status, tc.code)
		}
	}
}

// TestWriteShowsNoInternals: the client gets the sentinel's fixed message
// (or the validator's detail) and the seats at fault, never the chain.
func TestWriteShowsNoInternals(t *testing.T) {
	for _, tc := range []struct {
		err     error
		message string
		seats   []string
	}{
		{fmt.Errorf("memqueue: room nope: %w", queue.ErrRoomNotFound), "room not found", nil},
		{fmt.Errorf("sqlitebooking: schedule 99: %w", booking.ErrNotFound), "not found", nil},
		{fmt.Errorf("sqlitebooking: add seats: %w: %w", booking.ErrInvalid, errors.New("UNIQUE constraint failed: seat.schedule_id")), "invalid input", nil},
		{fmt.Errorf("sale: hold: %w", queue.ErrInvalid.Detail("max_active: want 1 to 10")), "max_active: want 1 to 10", nil},
		{fmt.Errorf("redishold: hold 1: %w", &hold.TakenError{Seats: []string{"7", "8"}}), "seats already held", []string{"7", "8"}},
		{fmt.Errorf("sale: reserve: %w", &sale.NotHeldError{Seats: []string{"9"}}), "seats not held by the caller", []string{"9"}},
		{fmt.Errorf("redisqueue: enter r: %w: %w", queue.ErrUnavailable, context.DeadlineExceeded), apierror.UnavailableMessage, nil},
		{errors.New("pgbooking: SELECT 1: SQLSTATE 42P01"), "Internal Server Error", nil},
	} {
		rec := httptest.NewRecorder()
		apierror.Writer{}.Write(rec, httptest.NewRequest("GET", "/", nil), tc.err)
		var b apierror.Body
		if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
			t.Fatalf("%v: body %s: %v", tc.err, rec.Body, err)
		}
		if b.Error.Message != tc.message || !slices.Equal(b.Error.Seats, tc.seats) {
			t.Errorf("%v: message %q seats %v, want %q %v", tc.err, b.Error.Message, b.Error.Seats, tc.message, tc.seats)
		}
		if got := rec.Header().Get("Retry-After"); (rec.Code == http.StatusServiceUnavailable) != (got != "") {
			t.Errorf("%v: status %d with Retry-After %q", tc.err, rec.Code, got)
		}
	}
}

type delayed struct{ d time.Duration }

func (e delayed) Error() string                  { return "slow down" }
func (e delayed) Unwrap() error                  { return errLimited }
func (e delayed) FaultRetryAfter() time.Duration { return e.d }

var errLimited = fault.New(fault.RateLimited, "slow down")

// TestRetryAfterFor: a fault.Delayed error's own wait, rounded up to whole
// seconds and at least 1, else the fixed RetryAfter; Write sends it with
// a 429.
func TestRetryAfterFor(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{delayed{6200 * time.Millisecond}, "7"},
		{fmt.Errorf("wrapped: %w", delayed{time.Millisecond}), "1"},
		{errLimited, apierror.RetryAfter},
	} {
		if got := apierror.RetryAfterFor(tc.err); got != tc.want {
			t.Errorf("RetryAfterFor(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	w := httptest.NewRecorder()
	apierror.Writer{}.Write(w, httptest.NewRequest("POST", "/", nil), delayed{30 * time.Second})
	if w.Code != 429 || w.Header().Get("Retry-After") != "30" {
		t.Errorf("Write: %d, Retry-After %q; want 429 and 30", w.Code, w.Header().Get("Retry-After"))
	}
}

// TestClientGone: a store call cut short because the client hung up is not
// a 503: it is logged at debug level and counted under no code. The same
// error while the client still waits is a 503.
func TestClientGone(t *testing.T) {
	cut := fmt.Errorf("redisqueue: enter r: %w: %w", queue.ErrUnavailable, context.Canceled)
	for _, tc := range []struct {
		name        string
		hungUp      bool
		err         error
		status      int
		level       string
		unavailable float64
	}{
		{"client hung up", true, cut, apierror.StatusClientClosed, "DEBUG", 0},
		{"database, client hung up", true, fmt.Errorf("sqlitebooking: seats: %w: %w", booking.ErrUnavailable, context.Canceled), apierror.StatusClientClosed, "DEBUG", 0},
		{"cancelled inside, client waits", false, cut, 503, "ERROR", 1},
		{"store down, client hung up", true, fmt.Errorf("redisqueue: enter r: %w: connection refused", queue.ErrUnavailable), 503, "ERROR", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			reg := prometheus.NewRegistry()
			wr := apierror.Writer{Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Counts: apierror.NewCounts(reg)}
			ctx, cancel := context.WithCancel(context.Background())
			if tc.hungUp {
				cancel()
			}
			defer cancel()
			rec := httptest.NewRecorder()
			wr.Write(rec, httptest.NewRequestWithContext(ctx, "POST", "/api/v1/rooms/r/entries", nil), tc.err)
			if rec.Code != tc.status {
				t.Errorf("status %d, want %d", rec.Code, tc.status)
			}
			if !strings.Contains(logs.String(), "level="+tc.level) || (tc.level == "DEBUG" && strings.Contains(logs.String(), "level=ERROR")) {
				t.Errorf("logged %q, want one line at %s", logs.String(), tc.level)
			}
			if got := unavailableCount(t, reg); got != tc.unavailable {
				t.Errorf("counted %v unavailable, want %v", got, tc.unavailable)
			}
		})
	}
}

// unavailableCount reads usher_http_errors_total{code="unavailable"}.
func unavailableCount(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if mf.GetName() == "usher_http_errors_total" && l.GetName() == "code" && l.GetValue() == "unavailable" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
