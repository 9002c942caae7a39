package httpapi_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"usher/internal/wire"
)

// TestHoldBest: POST …/holds with a count holds the best adjacent seats:
// the front row's middle first, then the blocks nearest it, then the next
// row; a price band picks its section; too many adjacent seats asked for
// is 409 sold_out saying how many there are; bad input is 400.
func TestHoldBest(t *testing.T) {
	t.Parallel()
	e := newBookingEnv(t)
	sch := e.newSchedule(t, "c", `{}`)
	// Section A: seats 1-20 (rows 1 and 2, numbers 1-10) at 50,000;
	// section B: seats 21-40 at 90,000.
	e.do(nil, "POST", fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID), adminKey, `{"sections":["A"],"rows":2,"seats_per_row":10,"price":50000}`)
	e.do(nil, "POST", fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID), adminKey, `{"sections":["B"],"rows":2,"seats_per_row":10,"price":90000}`)
	e.putRoom(sch.Room, `{"max_active":50,"admit_rate":100}`)
	holds := fmt.Sprintf("/api/v1/schedules/%d/holds", sch.ID)
	n := 0
	best := func(body string) resp {
		n++
		pass := e.do(nil, "POST", "/api/v1/rooms/"+sch.Room+"/entries", adminKey, fmt.Sprintf(`{"visitor_id":"v%d"}`, n)).entry(t).Pass
		return e.do(nil, "POST", holds, pass, body)
	}
	for _, tc := range []struct {
		body string
		want []int64
	}{
		{`{"count":2,"section":"A"}`, []int64{5, 6}},        // the middle of row 1
		{`{"count":2,"section":"A"}`, []int64{3, 4}},        // nearest the middle, left first
		{`{"count":4,"section":"A"}`, []int64{7, 8, 9, 10}}, // the only 4 left in row 1
		{`{"count":3,"section":"A"}`, []int64{14, 15, 16}},  // row 1 has 2 left: row 2
		{`{"count":2,"min_price":60000}`, []int64{25, 26}},  // the band is section B
		{`{"count":1,"max_price":50000}`, []int64{2}},       // A's row 1: 1 and 2 left, 2 nearer the middle
		{`{"count":4}`, []int64{21, 22, 23, 24}},            // front rows first: B's row 1 before A's row 2
		{`{"count":3,"section":"B","max_price":90000}`, []int64{27, 28, 29}},
		{`{"count":4,"section":"A"}`, []int64{17, 18, 19, 20}},
	} {
		r := best(tc.body)
		if r.status != 201 {
			t.Fatalf("%s: %d %s", tc.body, r.status, r.body)
		}
		if got := decodeInto[wire.Hold](t, r).SeatIDs; !slices.Equal(got, tc.want) {
			t.Errorf("%s: seats %v, want %v", tc.body, got, tc.want)
		}
	}
	r := best(`{"count":4,"section":"A"}`) // A has 1 (row 1) and 3 (row 2) adjacent left
	if r.status != 409 || r.errorCode(t) != "sold_out" || !strings.Contains(string(r.body), "at most 3 adjacent") {
		t.Errorf("4 adjacent in A: %d %s, want 409 sold_out saying at most 3", r.status, r.body)
	}
	for _, body := range []string{
		`{"count":0}`, `{"count":5}`, `{"count":2,"seat_ids":[1]}`, `{"section":"A"}`,
		`{"count":2,"min_price":9,"max_price":8}`, `{"count":2,"min_price":-1}`,
	} {
		if r := best(body); r.status != 400 || r.errorCode(t) != "invalid_request" {
			t.Errorf("%s: %d %s, want 400 invalid_request", body, r.status, r.body)
		}
	}
}
