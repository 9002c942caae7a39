package httpapi_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"usher/internal/booking/sqlitebooking"
	"usher/internal/hold/memhold"
	"usher/internal/queue/memqueue"
	"usher/internal/sale"
	"usher/internal/wire"
)

// TestBuyerLimit: with --buyer-limit 3 a visitor buys 3 tickets of a
// schedule across reservations; a hold or a reservation beyond is 409
// buyer_limit, whether the tickets are bought or held; another visitor
// is not affected.
func TestBuyerLimit(t *testing.T) {
	t.Parallel()
	catalog, err := sqlitebooking.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { catalog.Close() })
	e := newBookingEnvOn(t, memqueue.New(), memhold.New(), catalog, func(c *sale.Config) { c.BuyerLimit = 3 })
	sch := e.newSchedule(t, "c", `{}`)
	e.do(nil, "POST", fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID), adminKey, `{"sections":["A"],"rows":1,"seats_per_row":10}`)
	e.putRoom(sch.Room, `{"max_active":10,"admit_rate":100}`)
	holds := fmt.Sprintf("/api/v1/schedules/%d/holds", sch.ID)
	enter := func(visitor string) string {
		return e.do(nil, "POST", "/api/v1/rooms/"+sch.Room+"/entries", adminKey, fmt.Sprintf(`{"visitor_id":%q}`, visitor)).entry(t).Pass
	}
	buy := func(pass, seats, key string) {
		t.Helper()
		if r := e.do(nil, "POST", holds, pass, `{"seat_ids":`+seats+`}`); r.status != 201 {
			t.Fatalf("hold %s: %d %s", seats, r.status, r.body)
		}
		r := e.do(nil, "POST", "/api/v1/reservations", pass, fmt.Sprintf(`{"schedule_id":%d,"seat_ids":%s,"idempotency_key":%q}`, sch.ID, seats, key))
		res := decodeInto[wire.Reservation](t, r)
		if last := readEvents(t, e, "/api/v1/reservations/"+res.ReservationID+"/events", pass); last.Status != "confirmed" {
			t.Fatalf("reservation of %s: %+v, want confirmed", seats, last)
		}
	}
	refused := func(what string, r resp) {
		t.Helper()
		if r.status != 409 || r.errorCode(t) != "buyer_limit" {
			t.Errorf("%s: %d %s, want 409 buyer_limit", what, r.status, r.body)
		}
	}

	buy(enter("alice"), `[1,2]`, "k1") // confirmed: the slot ends
	alice := enter("alice")
	refused("two more seats after two bought", e.do(nil, "POST", holds, alice, `{"seat_ids":[3,4]}`))
	if r := e.do(nil, "POST", holds, alice, `{"seat_ids":[3]}`); r.status != 201 {
		t.Fatalf("the third seat: %d %s", r.status, r.body)
	}
	refused("a fourth seat held beside the third", e.do(nil, "POST", holds, alice, `{"seat_ids":[4]}`))
	r := e.do(nil, "POST", "/api/v1/reservations", alice, fmt.Sprintf(`{"schedule_id":%d,"seat_ids":[3],"idempotency_key":"k2"}`, sch.ID))
	res := decodeInto[wire.Reservation](t, r)
	if last := readEvents(t, e, "/api/v1/reservations/"+res.ReservationID+"/events", alice); last.Status != "confirmed" {
		t.Fatalf("the third seat's reservation: %+v", last)
	}
	alice = enter("alice")
	refused("a hold after three bought", e.do(nil, "POST", holds, alice, `{"seat_ids":[5]}`))

	buy(enter("bob"), `[5,6,7]`, "k1") // bob's own three
}
