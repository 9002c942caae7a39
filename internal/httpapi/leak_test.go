package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/booking/pgbooking"
	"usher/internal/gateway"
	"usher/internal/hold/redishold"
	"usher/internal/queue/redisqueue"
	"usher/internal/testenv"
)

// internals are what a client's error message must never show: package
// and library names, SQL (its keywords in capitals: "from" and "to" are
// the analytics' parameters), file paths, Go types.
var internals = regexp.MustCompile(`(?i)\b(memqueue|redisqueue|sqlitebooking|pgbooking|memhold|redishold|natsmq|` +
	`rueidis|redis|pgx|pgconn|postgres|sqlite|nats|jetstream|httpapi|apierror|gateway|fault)\b|` +
	`\b(queue|sale|hold|booking|mq|token|gate|proxy|json|sql|runtime):|` +
	`(?-i:\b(UNIQUE|CHECK|SQLSTATE|SELECT|INSERT|UPDATE|DELETE|WHERE|FROM)\b)|\b(constraint|violates|duplicate key|relation)\b|` +
	`(^|[\s"'(])/[\w.-]+/|\.go:\d|\.db\b|\bstruct\b|\[\]\w|\bint64\b`)

// leaked returns what message shows of usher's internals, or "". Besides
// the names above, a message with two or more ": " is a wrapped Go error
// chain: a validator's detail has at most one ("max_active: want …").
func leaked(message string) string {
	if m := internals.FindString(message); m != "" {
		return strings.TrimSpace(m)
	}
	if strings.Count(message, ": ") >= 2 {
		return "a wrapped error chain"
	}
	return ""
}

func TestLeaked(t *testing.T) {
	for _, msg := range []string{
		"memqueue: room nope: room not found",
		"sqlitebooking: schedule 99: not found",
		"UNIQUE constraint failed: seat.schedule_id, seat.section",
		"CHECK constraint failed: sold >= 0 AND sold <= total",
		`ERROR: duplicate key value violates unique constraint "seat_pkey" (SQLSTATE 23505)`,
		"open /var/lib/usher/usher.db: permission denied",
		"json: cannot unmarshal string into Go struct field .seat_ids of type []int64",
		"queue: renew bob in concert: visitor not admitted",
	} {
		if leaked(msg) == "" {
			t.Errorf("leaked(%q) = nothing, want a leak found", msg)
		}
	}
	for _, msg := range []string{
		"room not found", "invalid input", `room id "Bad_Room": want [a-z0-9][a-z0-9-]{0,63}`,
		"max_active: want 1 to 100000", "unknown field \"who\"", "a backend is unavailable; retry later",
		"total: below the units already sold", "seat_ids: a JSON string is the wrong type",
	} {
		if got := leaked(msg); got != "" {
			t.Errorf("leaked(%q) = %q, want nothing", msg, got)
		}
	}
}

// TestNoInternalsOnEveryBackend sends every error case of the API tests,
// and the errors only a database raises, through the server on each
// backend: errorCode fails on any message that shows internals, and the
// database's refusals read the same on SQLite and PostgreSQL. (The default
// memory + SQLite stack runs the full cases in TestErrors,
// TestBookingErrors and TestStockFlow.)
func TestNoInternalsOnEveryBackend(t *testing.T) {
	t.Run("memory+sqlite", func(t *testing.T) { testDatabaseRefusals(t, newBookingEnv(t)) })
	t.Run("redis+postgres", func(t *testing.T) {
		c := testenv.Redis(t)
		prefix := testenv.RedisPrefix(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		catalog, err := pgbooking.Open(ctx, testenv.PostgresSchema(t), 4)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { catalog.Close() })
		e := newBookingEnvOn(t, redisqueue.New(c, prefix), redishold.New(c, prefix+"hold:"), catalog)
		testErrors(t, e)
		testBookingErrors(t, e)
		testStockFlow(t, e)
		testDatabaseRefusals(t, e)
		testGatewayErrors(t, e)
	})
}

// testDatabaseRefusals: errors that come from the database's constraints
// and lookups, with the words every backend must use.
func testDatabaseRefusals(t *testing.T, e *env) {
	sch := e.newSchedule(t, "refusals", `{}`)
	seats := fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID)
	layout := `{"sections":["A"],"rows":1,"seats_per_row":2}`
	if r := e.do(nil, "POST", seats, adminKey, layout); r.status != 201 {
		t.Fatalf("add seats: %d %s", r.status, r.body)
	}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code, message            string
	}{
		{"seats that exist", "POST", seats, layout, 400, "invalid_request", "seats: the schedule already has one of them"},
		{"unknown schedule", "GET", "/api/v1/schedules/99999/stock", "", 404, "not_found", "not found"},
		{"unknown concert", "POST", "/api/v1/concerts/99999/schedules", `{}`, 404, "not_found", "not found"},
		{"unknown room", "GET", "/api/v1/rooms/nope", "", 404, "room_not_found", "room not found"},
	} {
		r := e.do(nil, tc.method, tc.path, adminKey, tc.body)
		var b struct {
			Error struct{ Code, Message string }
		}
		json.Unmarshal(r.body, &b)
		if code := r.errorCode(t); r.status != tc.status || code != tc.code || b.Error.Message != tc.message {
			t.Errorf("%s: %s %s = %d %s, want %d %s %q", tc.name, tc.method, tc.path, r.status, r.body, tc.status, tc.code, tc.message)
		}
	}
}

// testGatewayErrors: the proxy's JSON errors pass the same check.
func testGatewayErrors(t *testing.T, e *env) {
	origin, _ := url.Parse("http://127.0.0.1:1") // never reached: every request here fails first
	p, err := gateway.New(gateway.Config{Origin: origin, Queue: e.q, Keys: e.keys, Registry: prometheus.NewRegistry(),
		Rules: gateway.Rules{DefaultRoom: "nope"}, InsecureCookies: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name, pass string
		status     int
		code       string
	}{
		{"unknown room", "", 404, "room_not_found"},
		{"forged pass", "forged", 404, "room_not_found"},
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/tickets", nil)
		req.Header.Set("Accept", "application/json")
		if tc.pass != "" {
			req.Header.Set("Authorization", "Bearer "+tc.pass)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		r := resp{status: res.StatusCode, header: res.Header, body: body}
		if code := r.errorCode(t); r.status != tc.status || code != tc.code {
			t.Errorf("proxy, %s: %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
	}
}
