package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/booking"
	"usher/internal/booking/sqlitebooking"
	"usher/internal/hold"
	"usher/internal/hold/memhold"
	"usher/internal/httpapi"
	"usher/internal/mq/natsmq"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/sale"
	"usher/internal/testenv"
	"usher/internal/token"
	"usher/internal/wire"
)

// newBookingEnv serves the whole API on the embedded stack: memory queue
// and holds, SQLite, in-process NATS, with the consumer running.
func newBookingEnv(t *testing.T) *env {
	t.Helper()
	catalog, err := sqlitebooking.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { catalog.Close() })
	return newBookingEnvOn(t, memqueue.New(), memhold.New(), catalog)
}

// newBookingEnvOn serves the whole API on the given stores and in-process
// NATS, with the consumer running; opts change the sale's configuration.
func newBookingEnvOn(t *testing.T, qs queue.Store, holds hold.Store, catalog booking.Store, opts ...func(*sale.Config)) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := natsmq.StartEmbedded(testenv.DataDir(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := natsmq.ConnectEmbedded(srv)
	if err != nil {
		t.Fatal(err)
	}
	// A loaded machine once took more than the default 5 s to answer a
	// watch on the embedded server; the bound here only guards a hang.
	broker, err := natsmq.Open(ctx, nc, natsmq.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	store := &flakyStore{Store: qs}
	q := queue.New(store, queue.Options{})
	keys, err := token.LoadDir(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	cfg := sale.Config{Catalog: catalog, Holds: holds, Broker: broker, Queue: q,
		SnapshotEvery: time.Nanosecond, Workers: 2, RetryAfter: 50 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	svc := sale.New(cfg)
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	h := httpapi.NewServer(httpapi.Config{Queue: q, Keys: keys, AdminKey: adminKey, Registry: prometheus.NewRegistry(), Sale: svc})
	hs := httptest.NewTLSServer(h)
	t.Cleanup(func() {
		hs.Close()
		cancel()
		<-done
		nc.Close()
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return &env{t: t, srv: hs, store: store, q: q, keys: keys}
}

type scheduleRef struct {
	ID   int64  `json:"schedule_id"`
	Room string `json:"room"`
}

// newSchedule creates a concert titled title and a schedule of it from the
// schedule request body, as the operator would.
func (e *env) newSchedule(t *testing.T, title, body string) scheduleRef {
	t.Helper()
	r := e.do(nil, "POST", "/api/v1/concerts", adminKey, fmt.Sprintf(`{"title":%q}`, title))
	concert := decodeInto[struct {
		ID int64 `json:"concert_id"`
	}](t, r)
	if r.status != 201 {
		t.Fatalf("create concert: %d %s", r.status, r.body)
	}
	r = e.do(nil, "POST", fmt.Sprintf("/api/v1/concerts/%d/schedules", concert.ID), adminKey, body)
	if r.status != 201 {
		t.Fatalf("create schedule: %d %s", r.status, r.body)
	}
	return decodeInto[scheduleRef](t, r)
}

func decodeInto[T any](t *testing.T, r resp) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decode %d %s: %v", r.status, r.body, err)
	}
	return v
}

func TestBookingFlow(t *testing.T) {
	t.Parallel()
	e := newBookingEnv(t)
	// The catalog, by the operator.
	sch := e.newSchedule(t, "Spring concert", `{"starts_at":"2026-03-01T19:00:00Z"}`) // a sale open since then
	if sch.Room != fmt.Sprintf("schedule-%d", sch.ID) {
		t.Fatalf("schedule %d has room %q, want the default", sch.ID, sch.Room)
	}
	r := e.do(nil, "POST", fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID), adminKey, `{"sections":["A","B"],"rows":2,"seats_per_row":5,"price":50000}`)
	if r.status != 201 || !strings.Contains(string(r.body), `"added":20`) {
		t.Fatalf("add seats: %d %s", r.status, r.body)
	}
	e.putRoom(sch.Room, `{"max_active":10,"admit_rate":100}`)

	// A visitor enters (admitted at once) and gets a pass.
	alice := e.do(nil, "POST", "/api/v1/rooms/"+sch.Room+"/entries", adminKey, `{"visitor_id":"alice"}`).entry(t)
	bob := e.do(nil, "POST", "/api/v1/rooms/"+sch.Room+"/entries", adminKey, `{"visitor_id":"bob"}`).entry(t)
	if alice.Pass == "" || bob.Pass == "" {
		t.Fatalf("not admitted: %+v %+v", alice, bob)
	}
	seatsPath := fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID)
	r = e.do(nil, "GET", seatsPath, alice.Pass, "")
	seatMap := decodeInto[struct {
		ScheduleID int64 `json:"schedule_id"`
		Seats      []struct {
			ID     int64  `json:"seat_id"`
			Status string `json:"status"`
		} `json:"seats"`
	}](t, r)
	if r.status != 200 || len(seatMap.Seats) != 20 || seatMap.Seats[0].Status != "AVAILABLE" {
		t.Fatalf("seat map: %d %s", r.status, r.body)
	}
	s1, s2 := seatMap.Seats[0].ID, seatMap.Seats[1].ID

	holdsPath := fmt.Sprintf("/api/v1/schedules/%d/holds", sch.ID)
	r = e.do(nil, "POST", holdsPath, alice.Pass, fmt.Sprintf(`{"seat_ids":[%d,%d]}`, s1, s2))
	h := decodeInto[wire.Hold](t, r)
	if r.status != 201 || h.HoldID == "" || h.ExpiresAt.Before(time.Now()) {
		t.Fatalf("hold: %d %s", r.status, r.body)
	}
	r = e.do(nil, "POST", holdsPath, bob.Pass, fmt.Sprintf(`{"seat_ids":[%d]}`, s2))
	if code := r.errorCode(t); r.status != 409 || code != "seats_taken" || !strings.Contains(string(r.body), fmt.Sprintf(`"seats":["%d"]`, s2)) {
		t.Fatalf("bob holds alice's seat: %d %s, want 409 seats_taken listing %d", r.status, r.body, s2)
	}

	body := fmt.Sprintf(`{"schedule_id":%d,"seat_ids":[%d,%d],"idempotency_key":"order-1"}`, sch.ID, s1, s2)
	r = e.do(nil, "POST", "/api/v1/reservations", alice.Pass, body)
	res := decodeInto[wire.Reservation](t, r)
	if r.status != 202 || res.Status != "pending" || res.ReservationID == "" {
		t.Fatalf("reserve: %d %s", r.status, r.body)
	}
	// The events stream ends with the decision.
	last := readEvents(t, e, "/api/v1/reservations/"+res.ReservationID+"/events", alice.Ticket)
	if last.Status != "confirmed" {
		t.Fatalf("last event %+v, want confirmed", last)
	}
	// Readable with the ticket after the slot was released by the order.
	r = e.do(nil, "GET", "/api/v1/reservations/"+res.ReservationID, alice.Ticket, "")
	if got := decodeInto[wire.Reservation](t, r); r.status != 200 || got.Status != "confirmed" {
		t.Fatalf("get reservation: %d %s", r.status, r.body)
	}
	if r := e.do(nil, "GET", "/api/v1/rooms/"+sch.Room+"/pass", alice.Pass, ""); r.status != 403 {
		t.Errorf("alice's pass after her order = %d, want 403: the order frees the slot", r.status)
	}
	// A retry with the same idempotency key gives the same reservation, even
	// though the order ended alice's session.
	r = e.do(nil, "POST", "/api/v1/reservations", alice.Pass, body)
	if again := decodeInto[wire.Reservation](t, r); r.status != 202 || again.ReservationID != res.ReservationID || again.Status != "confirmed" {
		t.Errorf("retry: %d %s, want 202 with reservation %s confirmed", r.status, r.body, res.ReservationID)
	}
	r = e.do(nil, "POST", "/api/v1/reservations", bob.Pass, body)
	if code := r.errorCode(t); r.status != 409 || code != "seats_not_held" {
		t.Errorf("bob reserves alice's seats: %d %s, want 409 seats_not_held", r.status, r.body)
	}
	if r := e.do(nil, "GET", "/api/v1/reservations/"+res.ReservationID, bob.Ticket, ""); r.status != 404 {
		t.Errorf("bob reads alice's reservation: %d, want 404", r.status)
	}
	// Without a token, or with a forged one, an existing and an unknown id
	// get the same answer: the token is checked first.
	for _, tok := range []string{"", "t1.nope.nope.nope"} {
		want := 401
		known := e.do(nil, "GET", "/api/v1/reservations/"+res.ReservationID, tok, "")
		unknown := e.do(nil, "GET", "/api/v1/reservations/r-unknown-id", tok, "")
		if known.status != want || unknown.status != want || known.errorCode(t) != unknown.errorCode(t) {
			t.Errorf("token %q: existing id %d %s, unknown id %d %s; want the same 401", tok, known.status, known.body, unknown.status, unknown.body)
		}
	}
	r = e.do(nil, "GET", seatsPath, bob.Pass, "")
	if !strings.Contains(string(r.body), `"status":"SOLD"`) {
		t.Errorf("seat map after the sale lacks SOLD: %s", r.body)
	}
}

// readEvents reads a reservation's event stream to its end and returns the
// last state.
func readEvents(t *testing.T, e *env, path, bearer string) wire.Reservation {
	t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+bearer)
	res, err := validated(t, e.srv.Client()).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); res.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("events: %d %s", res.StatusCode, ct)
	}
	var last wire.Reservation
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if err := json.Unmarshal([]byte(data), &last); err != nil {
				t.Fatalf("event data %q: %v", data, err)
			}
		}
	}
	return last
}

func TestBookingErrors(t *testing.T) {
	t.Parallel()
	testBookingErrors(t, newBookingEnv(t))
}

// testBookingErrors sends every error case of the booking API to e; every
// answer passes errorCode's leak check.
func testBookingErrors(t *testing.T, e *env) {
	sch := e.newSchedule(t, "c", `{}`)
	e.do(nil, "POST", fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID), adminKey, `{"sections":["A"],"rows":1,"seats_per_row":3}`)
	pass := e.do(nil, "POST", "/api/v1/rooms/"+sch.Room+"/entries", adminKey, `{"visitor_id":"v"}`).entry(t).Pass
	holds := fmt.Sprintf("/api/v1/schedules/%d/holds", sch.ID)

	for _, tc := range []struct {
		name, method, path, bearer, body string
		status                           int
		code                             string
	}{
		{"seats without a pass", "GET", fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID), "", "", 403, "not_admitted"},
		{"unknown schedule", "GET", "/api/v1/schedules/999/seats", pass, "", 404, "not_found"},
		{"bad schedule id", "GET", "/api/v1/schedules/x/seats", pass, "", 400, "invalid_request"},
		{"unknown seat", "POST", holds, pass, `{"seat_ids":[424242]}`, 404, "seat_unknown"},
		{"no seats", "POST", holds, pass, `{"seat_ids":[]}`, 400, "invalid_request"},
		{"malformed hold", "POST", holds, pass, `{"seat_ids":"1"}`, 400, "bad_json"},
		{"release unknown hold", "DELETE", holds + "/nope", pass, "", 404, "hold_not_found"},
		{"reserve without key", "POST", "/api/v1/reservations", pass, fmt.Sprintf(`{"schedule_id":%d,"seat_ids":[1]}`, sch.ID), 400, "invalid_request"},
		{"reserve unknown schedule", "POST", "/api/v1/reservations", pass, `{"schedule_id":999,"seat_ids":[1],"idempotency_key":"k"}`, 404, "not_found"},
		{"reserve not held", "POST", "/api/v1/reservations", pass, fmt.Sprintf(`{"schedule_id":%d,"seat_ids":[1],"idempotency_key":"k"}`, sch.ID), 409, "seats_not_held"},
		{"unknown reservation", "GET", "/api/v1/reservations/nope", pass, "", 404, "reservation_not_found"},
		{"catalog without admin key", "POST", "/api/v1/concerts", pass, `{"title":"x"}`, 401, "admin_unauthorized"},
		{"bad layout", "POST", fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID), adminKey, `{"sections":[],"rows":1,"seats_per_row":1}`, 400, "invalid_request"},
		{"schedule of unknown concert", "POST", "/api/v1/concerts/999/schedules", adminKey, `{}`, 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(nil, tc.method, tc.path, tc.bearer, tc.body)
			if code := r.errorCode(t); r.status != tc.status || code != tc.code {
				t.Errorf("%s %s = %d %s, want %d %s", tc.method, tc.path, r.status, r.body, tc.status, tc.code)
			}
		})
	}
	// A hold released early frees its seats.
	r := e.do(nil, "POST", holds, pass, `{"seat_ids":[1]}`)
	h := decodeInto[wire.Hold](t, r)
	if r := e.do(nil, "DELETE", holds+"/"+h.HoldID, pass, ""); r.status != 204 {
		t.Fatalf("release: %d %s", r.status, r.body)
	}
	if r := e.do(nil, "POST", holds, pass, `{"seat_ids":[1]}`); r.status != 201 {
		t.Errorf("hold after release: %d %s", r.status, r.body)
	}
}

func TestStockFlow(t *testing.T) {
	t.Parallel()
	testStockFlow(t, newBookingEnv(t))
}

func testStockFlow(t *testing.T, e *env) {
	sch := e.newSchedule(t, "Flash sale", `{}`)
	e.putRoom(sch.Room, `{"max_active":10,"admit_rate":100}`)
	stockPath := fmt.Sprintf("/api/v1/schedules/%d/stock", sch.ID)
	r := e.do(nil, "PUT", stockPath, adminKey, `{"total":5}`)
	if r.status != 200 || string(r.body) != fmt.Sprintf(`{"schedule_id":%d,"total":5,"sold":0,"available":5}`+"\n", sch.ID) {
		t.Fatalf("set stock: %d %s", r.status, r.body)
	}

	alice := e.do(nil, "POST", "/api/v1/rooms/"+sch.Room+"/entries", adminKey, `{"visitor_id":"alice"}`).entry(t)
	bob := e.do(nil, "POST", "/api/v1/rooms/"+sch.Room+"/entries", adminKey, `{"visitor_id":"bob"}`).entry(t)
	holdsPath := fmt.Sprintf("/api/v1/schedules/%d/holds", sch.ID)
	r = e.do(nil, "POST", holdsPath, alice.Pass, `{"quantity":2}`)
	h := decodeInto[wire.Hold](t, r)
	if r.status != 201 || h.HoldID == "" || h.Quantity != 2 || h.SeatIDs != nil || h.ExpiresAt.Before(time.Now()) {
		t.Fatalf("hold stock: %d %s", r.status, r.body)
	}
	r = e.do(nil, "GET", stockPath, bob.Pass, "")
	if got := decodeInto[wire.Stock](t, r); r.status != 200 || got != (wire.Stock{ScheduleID: sch.ID, Available: 3}) {
		t.Fatalf("stock: %d %s, want 3 available", r.status, r.body)
	}

	body := fmt.Sprintf(`{"schedule_id":%d,"hold_id":%q,"idempotency_key":"ga-1"}`, sch.ID, h.HoldID)
	if r := e.do(nil, "POST", "/api/v1/reservations", bob.Pass, body); r.status != 404 || r.errorCode(t) != "hold_not_found" {
		t.Errorf("bob reserves alice's hold: %d %s, want 404 hold_not_found", r.status, r.body)
	}
	r = e.do(nil, "POST", "/api/v1/reservations", alice.Pass, body)
	res := decodeInto[wire.Reservation](t, r)
	if r.status != 202 || res.Status != "pending" || res.Quantity != 2 || res.SeatIDs != nil {
		t.Fatalf("reserve stock: %d %s", r.status, r.body)
	}
	if last := readEvents(t, e, "/api/v1/reservations/"+res.ReservationID+"/events", alice.Ticket); last.Status != "confirmed" || last.Quantity != 2 {
		t.Fatalf("last event %+v, want confirmed for 2", last)
	}
	r = e.do(nil, "GET", "/api/v1/reservations/"+res.ReservationID, alice.Ticket, "")
	if !strings.Contains(string(r.body), `"quantity":2`) {
		t.Errorf("get reservation: %d %s, want quantity 2", r.status, r.body)
	}
	r = e.do(nil, "PUT", stockPath, adminKey, `{"total":5}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"sold":2,"available":3`) {
		t.Errorf("stock after the sale: %d %s, want 2 sold, 3 available", r.status, r.body)
	}

	// Bob holds the rest; then nothing is left, and the limit holds.
	if r := e.do(nil, "POST", holdsPath, bob.Pass, `{"quantity":3}`); r.status != 201 {
		t.Fatalf("bob holds 3: %d %s", r.status, r.body)
	}
	carol := e.do(nil, "POST", "/api/v1/rooms/"+sch.Room+"/entries", adminKey, `{"visitor_id":"carol"}`).entry(t)
	for _, tc := range []struct {
		name, method, path, bearer, body string
		status                           int
		code                             string
	}{
		{"sold out", "POST", holdsPath, carol.Pass, `{"quantity":1}`, 409, "sold_out"},
		{"over the limit", "POST", holdsPath, carol.Pass, `{"quantity":5}`, 409, "hold_limit"},
		{"seats and quantity", "POST", holdsPath, carol.Pass, `{"seat_ids":[1],"quantity":1}`, 400, "invalid_request"},
		{"no quantity", "POST", holdsPath, carol.Pass, `{"quantity":0}`, 400, "invalid_request"},
		{"seats and hold", "POST", "/api/v1/reservations", carol.Pass, fmt.Sprintf(`{"schedule_id":%d,"seat_ids":[1],"hold_id":"h","idempotency_key":"k"}`, sch.ID), 400, "invalid_request"},
		{"unknown hold", "POST", "/api/v1/reservations", carol.Pass, fmt.Sprintf(`{"schedule_id":%d,"hold_id":"nope","idempotency_key":"k"}`, sch.ID), 404, "hold_not_found"},
		{"stock without a pass", "GET", stockPath, "", "", 403, "not_admitted"},
		{"set stock without admin key", "PUT", stockPath, carol.Pass, `{"total":9}`, 401, "admin_unauthorized"},
		{"set stock below sold", "PUT", stockPath, adminKey, `{"total":1}`, 400, "invalid_request"},
		{"set stock without total", "PUT", stockPath, adminKey, `{}`, 400, "invalid_request"},
		{"set stock above 2^53", "PUT", stockPath, adminKey, `{"total":9007199254740993}`, 400, "invalid_request"},
		{"set stock above the most", "PUT", stockPath, adminKey, `{"total":1000000001}`, 400, "invalid_request"},
		{"set stock of unknown schedule", "PUT", "/api/v1/schedules/999/stock", adminKey, `{"total":1}`, 404, "not_found"},
		{"stock method", "DELETE", stockPath, adminKey, "", 405, "method_not_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(nil, tc.method, tc.path, tc.bearer, tc.body)
			if code := r.errorCode(t); r.status != tc.status || code != tc.code {
				t.Errorf("%s %s = %d %s, want %d %s", tc.method, tc.path, r.status, r.body, tc.status, tc.code)
			}
		})
	}
}

// A schedule's show time is not its sale's opening: a show weeks away gets
// a room open at once, unless the request names sale_opens_at, which
// becomes the room's opens_at, with the opening draw.
func TestScheduleSaleOpening(t *testing.T) {
	t.Parallel()
	e := newBookingEnv(t)
	show := time.Now().Add(38 * 24 * time.Hour).UTC().Truncate(time.Second)

	sch := e.newSchedule(t, "Winter concert", fmt.Sprintf(`{"starts_at":%q}`, show.Format(time.RFC3339)))
	r := e.do(nil, "GET", "/api/v1/rooms/"+sch.Room, adminKey, "")
	if room := decodeInto[wire.Room](t, r); r.status != 200 || setting[string](room.Settings, "opens_at") != "" {
		t.Errorf("room of a show on %v without sale_opens_at: %d %s, want no opens_at", show, r.status, r.body)
	}
	if r := e.do(e.client(), "POST", "/api/v1/rooms/"+sch.Room+"/entries", "", ""); r.status != 201 || r.entry(t).RoomState == "pre_queue" {
		t.Errorf("enter the room of a show still to come: %d %s, want an open room", r.status, r.body)
	}

	opens := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	sch = e.newSchedule(t, "Spring concert", fmt.Sprintf(`{"starts_at":%q,"sale_opens_at":%q}`, show.Format(time.RFC3339), opens.Format(time.RFC3339)))
	r = e.do(nil, "GET", "/api/v1/rooms/"+sch.Room, adminKey, "")
	if room := decodeInto[wire.Room](t, r); r.status != 200 || setting[string](room.Settings, "opens_at") != opens.Format(time.RFC3339Nano) {
		t.Errorf("room with sale_opens_at %v: %d %s, want it as opens_at", opens, r.status, r.body)
	}
	if r := e.do(e.client(), "POST", "/api/v1/rooms/"+sch.Room+"/entries", "", ""); r.status != 201 || r.entry(t).RoomState != "pre_queue" {
		t.Errorf("enter before the sale opens: %d %s, want the pre-queue", r.status, r.body)
	}
	if r := e.do(nil, "GET", "/api/v1/rooms/"+sch.Room+"/draw", "", ""); r.status != 200 {
		t.Errorf("draw of the schedule's room: %d %s", r.status, r.body)
	}

	r = e.do(nil, "POST", "/api/v1/concerts/1/schedules", adminKey, fmt.Sprintf(`{"starts_at":%q,"sale_opens_at":%q}`, opens.Format(time.RFC3339), show.Format(time.RFC3339)))
	if code := r.errorCode(t); r.status != 400 || code != "invalid_request" {
		t.Errorf("sale opening after the show: %d %s, want 400 invalid_request", r.status, r.body)
	}
}

// TestAdminKeyReadsSeatMap: as docs/api.md's route table says, the admin
// key reads the seat map (200) but is not a pass for holding (401
// token_invalid).
func TestAdminKeyReadsSeatMap(t *testing.T) {
	t.Parallel()
	e := newBookingEnv(t)
	sch := e.newSchedule(t, "c", `{}`)
	e.do(nil, "POST", fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID), adminKey, `{"sections":["A"],"rows":1,"seats_per_row":3}`)
	if r := e.do(nil, "GET", fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID), adminKey, ""); r.status != 200 {
		t.Errorf("seat map with the admin key = %d %s, want 200", r.status, r.body)
	}
	r := e.do(nil, "POST", fmt.Sprintf("/api/v1/schedules/%d/holds", sch.ID), adminKey, `{"seat_ids":[1]}`)
	if code := r.errorCode(t); r.status != 401 || code != "token_invalid" {
		t.Errorf("hold with the admin key = %d %s, want 401 token_invalid", r.status, r.body)
	}
}
