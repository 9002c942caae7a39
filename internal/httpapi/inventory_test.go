package httpapi_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/booking/sqlitebooking"
	"usher/internal/hold"
	"usher/internal/hold/memhold"
	"usher/internal/hold/redishold"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/queue/redisqueue"
	"usher/internal/sale"
	"usher/internal/testenv"
	"usher/internal/wire"
)

// saleClock is the sale's clock (and so the holds'): real time plus an
// offset that tests move forward to expire holds.
type saleClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *saleClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *saleClock) add(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// TestInventoryAwareAdmission sells a schedule of 4 seats through the
// booking API, on the memory and on the Redis hold store: admission keeps
// to visitors_per_unit per seat left; when every seat is held or sold the
// room turns sold out by itself (waiting visitors told at their next poll,
// newcomers refused with 409 sold_out, nobody admitted) while its state
// setting stays open; when a hold expires it opens again, still capped.
func TestInventoryAwareAdmission(t *testing.T) {
	t.Parallel()
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		testInventoryAwareAdmission(t, memqueue.New(), memhold.New())
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		c := testenv.Redis(t)
		prefix := testenv.RedisPrefix(t, c)
		testInventoryAwareAdmission(t, redisqueue.New(c, prefix), redishold.New(c, prefix+"hold:"))
	})
}

func testInventoryAwareAdmission(t *testing.T, qs queue.Store, holds hold.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	catalog, err := sqlitebooking.Open(ctx, filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { catalog.Close() })
	clk := &saleClock{}
	e := newBookingEnvOn(t, qs, holds, catalog, func(c *sale.Config) {
		c.Now, c.InventoryEvery = clk.now, 20*time.Millisecond
	})
	go e.q.Run(ctx) // the view: what visitors are told

	sch := e.newSchedule(t, "Small hall", `{"starts_at":"2026-03-01T19:00:00Z"}`)
	if r := e.do(nil, "POST", fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID), adminKey, `{"sections":["A"],"rows":1,"seats_per_row":4,"price":100}`); r.status != 201 {
		t.Fatalf("add seats: %d %s", r.status, r.body)
	}
	e.putRoom(sch.Room, `{"max_active":10,"admit_rate":100,"visitors_per_unit":1}`)
	roomPath := "/api/v1/rooms/" + sch.Room
	stats := func() wire.RoomStats {
		t.Helper()
		r := e.do(nil, "GET", roomPath, adminKey, "")
		if r.status != 200 {
			t.Fatalf("GET room: %d %s", r.status, r.body)
		}
		return decodeInto[wire.Room](t, r).Stats
	}
	waitFor := func(what, state string, units int64) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, what, func() bool {
			st := stats()
			return st.EffectiveState == state && st.Inventory != nil && *st.Inventory == units
		})
	}
	waitFor("the sale counts 4 seats", "open", 4)

	enter := func(visitor string) (wire.Entry, int) {
		t.Helper()
		r := e.do(nil, "POST", roomPath+"/entries", adminKey, fmt.Sprintf(`{"visitor_id":%q}`, visitor))
		return r.entry(t), r.status
	}
	// 4 seats, 1 visitor per seat: 4 admitted at once, the fifth waits.
	pass := map[string]string{}
	for _, v := range []string{"a", "b", "c", "d"} {
		en, _ := enter(v)
		if en.State != "admitted" {
			t.Fatalf("%s entered %+v, want admitted (4 seats left)", v, en)
		}
		pass[v] = en.Pass
	}
	waiting, _ := enter("e")
	if waiting.State != "waiting" {
		t.Fatalf("fifth visitor %+v, want waiting: the cap is 1 visitor per seat", waiting)
	}

	// a and b hold every seat: sold out by itself.
	holdsPath := fmt.Sprintf("/api/v1/schedules/%d/holds", sch.ID)
	seatMap := decodeInto[struct {
		Seats []struct {
			ID int64 `json:"seat_id"`
		} `json:"seats"`
	}](t, e.do(nil, "GET", fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID), pass["a"], ""))
	if len(seatMap.Seats) != 4 {
		t.Fatalf("seat map has %d seats, want 4", len(seatMap.Seats))
	}
	s := seatMap.Seats
	if r := e.do(nil, "POST", holdsPath, pass["a"], fmt.Sprintf(`{"seat_ids":[%d,%d]}`, s[0].ID, s[1].ID)); r.status != 201 {
		t.Fatalf("a holds: %d %s", r.status, r.body)
	}
	if r := e.do(nil, "POST", holdsPath, pass["b"], fmt.Sprintf(`{"seat_ids":[%d,%d]}`, s[2].ID, s[3].ID)); r.status != 201 {
		t.Fatalf("b holds: %d %s", r.status, r.body)
	}
	waitFor("every seat held: sold out", "sold_out", 0)
	r := e.do(nil, "GET", roomPath, adminKey, "")
	if got := setting[string](decodeInto[wire.Room](t, r).Settings, "state"); got != "open" {
		t.Errorf("the room's state setting = %s, want open: the sold out is the inventory's", got)
	}
	testenv.Eventually(t, 10*time.Second, "the waiting visitor is told sold_out", func() bool {
		en := e.do(nil, "GET", roomPath+"/entries/me", waiting.Ticket, "").entry(t)
		return en.State == "sold_out" && en.RoomState == "sold_out"
	})
	r = e.do(nil, "POST", roomPath+"/entries", adminKey, `{"visitor_id":"f"}`)
	if code := r.errorCode(t); r.status != 409 || code != "sold_out" {
		t.Errorf("newcomer into a sold-out room: %d %s, want 409 sold_out, as the operator's sold_out", r.status, r.body)
	}
	if res, err := e.q.Admit(ctx, sch.Room); err != nil || len(res.Admitted) != 0 {
		t.Errorf("admission step in a sold-out room = %+v, %v; want nobody", res, err)
	}

	// a buys her two seats; b's hold expires: two seats come back.
	r = e.do(nil, "POST", "/api/v1/reservations", pass["a"], fmt.Sprintf(`{"schedule_id":%d,"seat_ids":[%d,%d],"idempotency_key":"k"}`, sch.ID, s[0].ID, s[1].ID))
	if r.status != 202 {
		t.Fatalf("a reserves: %d %s", r.status, r.body)
	}
	res := decodeInto[wire.Reservation](t, r)
	if last := readEvents(t, e, "/api/v1/reservations/"+res.ReservationID+"/events", pass["a"]); last.Status != "confirmed" {
		t.Fatalf("a's reservation %+v, want confirmed", last)
	}
	clk.add(6 * time.Minute) // past the hold's 5 min
	waitFor("b's hold expired: open again", "open", 2)
	testenv.Eventually(t, 10*time.Second, "the waiting visitor is told open", func() bool {
		return e.do(nil, "GET", roomPath+"/entries/me", waiting.Ticket, "").entry(t).RoomState == "open"
	})

	// b, c and d are still active (a's order freed her slot): 3 ≥ 2 × 1,
	// so nobody is admitted until two of them leave.
	if res, err := e.q.Admit(ctx, sch.Room); err != nil || len(res.Admitted) != 0 {
		t.Errorf("admission with 3 active and 2 seats left = %+v, %v; want nobody (visitors_per_unit 1)", res, err)
	}
	for _, v := range []string{"c", "d"} {
		if r := e.do(nil, "DELETE", roomPath+"/entries/me", pass[v], ""); r.status != 204 {
			t.Fatalf("%s leaves: %d %s", v, r.status, r.body)
		}
	}
	if res, err := e.q.Admit(ctx, sch.Room); err != nil || len(res.Admitted) != 1 || res.Admitted[0] != "e" {
		t.Errorf("admission with 1 active and 2 seats left = %+v, %v; want e", res, err)
	}
	if _, status := enter("f"); status != 201 {
		t.Errorf("newcomer after the seats came back: %d, want 201", status)
	}
}

// TestInventoryFailSafe: while the Redis hold store is cut off, the sale
// cannot count, and the rooms keep their last count: a stock schedule whose
// units cannot be read is not made sold out, a seat schedule keeps its
// seats. Once the store is back, counting resumes (a stock hold shows).
func TestInventoryFailSafe(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	direct := testenv.Redis(t)
	prefix := testenv.RedisPrefix(t, direct)
	opt, err := rueidis.ParseURL(testenv.URL(t, "USHER_TEST_REDIS"))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, opt.InitAddress[0])
	opt.InitAddress, opt.DisableCache, opt.DisableRetry = []string{proxy.Addr()}, true, true
	cut, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cut.Close)
	catalog, err := sqlitebooking.Open(ctx, filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { catalog.Close() })
	e := newBookingEnvOn(t, memqueue.New(), hold.WithTimeout(redishold.New(cut, prefix+"hold:"), time.Second), catalog,
		func(c *sale.Config) { c.InventoryEvery = 20 * time.Millisecond })
	go e.q.Run(ctx)

	seats := e.newSchedule(t, "Seats", `{}`)
	if r := e.do(nil, "POST", fmt.Sprintf("/api/v1/schedules/%d/seats", seats.ID), adminKey, `{"sections":["A"],"rows":1,"seats_per_row":3,"price":1}`); r.status != 201 {
		t.Fatalf("add seats: %d %s", r.status, r.body)
	}
	stock := e.newSchedule(t, "Stock", `{}`)
	stockPath := fmt.Sprintf("/api/v1/schedules/%d/stock", stock.ID)
	if r := e.do(nil, "PUT", stockPath, adminKey, `{"total":5}`); r.status != 200 {
		t.Fatalf("set stock: %d %s", r.status, r.body)
	}
	inventory := func(room string) (string, int64) {
		t.Helper()
		st := decodeInto[wire.Room](t, e.do(nil, "GET", "/api/v1/rooms/"+room, adminKey, "")).Stats
		if st.Inventory == nil {
			return st.EffectiveState, -1
		}
		return st.EffectiveState, *st.Inventory
	}
	counted := func(room string, want int64) func() bool {
		return func() bool { state, n := inventory(room); return state == "open" && n == want }
	}
	testenv.Eventually(t, 30*time.Second, "3 seats counted", counted(seats.Room, 3))
	testenv.Eventually(t, 30*time.Second, "5 units counted", counted(stock.Room, 5))

	proxy.Cut()
	refused := proxy.Refused()
	testenv.Eventually(t, 30*time.Second, "counting tried against the cut hold store", func() bool {
		return proxy.Refused() >= refused+5
	})
	for room, want := range map[string]int64{seats.Room: 3, stock.Room: 5} {
		if state, n := inventory(room); state != "open" || n != want {
			t.Errorf("room %s during the outage: %s with %d units, want open with the last count, %d", room, state, n, want)
		}
	}

	proxy.Restore(t)
	bob := e.do(nil, "POST", "/api/v1/rooms/"+stock.Room+"/entries", adminKey, `{"visitor_id":"bob"}`).entry(t)
	testenv.Eventually(t, 30*time.Second, "a stock hold once the store is back", func() bool {
		return e.do(nil, "POST", fmt.Sprintf("/api/v1/schedules/%d/holds", stock.ID), bob.Pass, `{"quantity":2}`).status == 201
	})
	testenv.Eventually(t, 30*time.Second, "3 units counted after the outage", counted(stock.Room, 3))
}
