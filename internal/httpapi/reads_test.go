package httpapi_test

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"usher/internal/booking"
	"usher/internal/booking/sqlitebooking"
	"usher/internal/hold/memhold"
	"usher/internal/queue/memqueue"
	"usher/internal/testenv"
	"usher/internal/wire"
)

// pageAll reads a paged list to its end, limit rows a page, and returns
// every page; it fails on a page that is not 200, or longer than limit.
func pageAll[T any](t *testing.T, e *env, path, bearer string, limit int) []T {
	t.Helper()
	var pages []T
	u, _ := url.Parse(path)
	q := u.Query()
	q.Set("limit", fmt.Sprint(limit))
	for range 100 {
		u.RawQuery = q.Encode()
		r := e.do(nil, "GET", u.String(), bearer, "")
		if r.status != 200 {
			t.Fatalf("GET %s: %d %s", u, r.status, r.body)
		}
		page := decodeInto[struct {
			Next string `json:"next"`
		}](t, r)
		pages = append(pages, decodeInto[T](t, r))
		if page.Next == "" {
			return pages
		}
		q.Set("after", page.Next)
	}
	t.Fatalf("GET %s: more than 100 pages", path)
	return nil
}

// wantError checks a JSON error answer.
func wantError(t *testing.T, e *env, method, path, bearer string, status int, code string) {
	t.Helper()
	r := e.do(nil, method, path, bearer, "")
	if r.status != status || r.errorCode(t) != code {
		t.Errorf("%s %s: %d %s, want %d %s", method, path, r.status, r.body, status, code)
	}
}

func TestCatalogReads(t *testing.T) {
	t.Parallel()
	e := newBookingEnv(t)
	var concerts []int64
	schedules := map[int64][]int64{} // concert → its schedules, in creation order
	var all []int64
	for i, title := range []string{"A", "B", "C"} {
		r := e.do(nil, "POST", "/api/v1/concerts", adminKey, fmt.Sprintf(`{"title":%q}`, title))
		c := decodeInto[wire.Concert](t, r)
		concerts = append(concerts, c.ConcertID)
		for range 3 - i { // A has 3 schedules, B 2, C 1
			r := e.do(nil, "POST", fmt.Sprintf("/api/v1/concerts/%d/schedules", c.ConcertID), adminKey, `{"starts_at":"2026-03-01T19:00:00Z"}`)
			sch := decodeInto[wire.Schedule](t, r)
			if r.status != 201 {
				t.Fatalf("create schedule: %d %s", r.status, r.body)
			}
			schedules[c.ConcertID] = append(schedules[c.ConcertID], sch.ScheduleID)
			all = append(all, sch.ScheduleID)
		}
	}
	slices.Sort(all)

	// Public: no key. Two pages of 2, in id order.
	var got []int64
	for _, p := range pageAll[wire.ConcertList](t, e, "/api/v1/concerts", "", 2) {
		for _, c := range p.Concerts {
			got = append(got, c.ConcertID)
		}
	}
	if !slices.Equal(got, concerts) {
		t.Errorf("concerts by pages of 2 = %v, want %v", got, concerts)
	}
	if pages := pageAll[wire.ConcertList](t, e, "/api/v1/concerts", "", 2); len(pages) != 2 || pages[1].Next != "" {
		t.Errorf("concerts: %d pages, want 2, the last without next", len(pages))
	}
	r := e.do(nil, "GET", fmt.Sprintf("/api/v1/concerts/%d", concerts[1]), "", "")
	if c := decodeInto[wire.Concert](t, r); r.status != 200 || c.ConcertID != concerts[1] || c.Title != "B" || c.CreatedAt.IsZero() {
		t.Errorf("GET concert: %d %s", r.status, r.body)
	}

	got = nil
	for _, p := range pageAll[wire.ScheduleList](t, e, "/api/v1/schedules", "", 4) {
		for _, s := range p.Schedules {
			got = append(got, s.ScheduleID)
		}
	}
	if !slices.Equal(got, all) {
		t.Errorf("schedules by pages of 4 = %v, want %v", got, all)
	}
	got = nil
	for _, p := range pageAll[wire.ScheduleList](t, e, fmt.Sprintf("/api/v1/schedules?concert=%d", concerts[0]), "", 1) {
		for _, s := range p.Schedules {
			if s.ConcertID != concerts[0] {
				t.Errorf("schedule %+v listed for concert %d", s, concerts[0])
			}
			got = append(got, s.ScheduleID)
		}
	}
	if !slices.Equal(got, schedules[concerts[0]]) {
		t.Errorf("schedules of concert %d by pages of 1 = %v, want %v", concerts[0], got, schedules[concerts[0]])
	}
	r = e.do(nil, "GET", fmt.Sprintf("/api/v1/schedules/%d", all[0]), "", "")
	if s := decodeInto[wire.Schedule](t, r); r.status != 200 || s.ScheduleID != all[0] || s.ConcertID != concerts[0] ||
		s.Room != fmt.Sprintf("schedule-%d", all[0]) || !s.StartsAt.Equal(time.Date(2026, 3, 1, 19, 0, 0, 0, time.UTC)) {
		t.Errorf("GET schedule: %d %s", r.status, r.body)
	}

	// A cursor of one list means nothing to another.
	first := decodeInto[wire.ScheduleList](t, e.do(nil, "GET", "/api/v1/schedules?limit=1", "", ""))
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"/api/v1/concerts?limit=0", 400, "invalid_request"},
		{"/api/v1/concerts?limit=501", 400, "invalid_request"},
		{"/api/v1/concerts?limit=x", 400, "invalid_request"},
		{"/api/v1/concerts?limit=", 400, "invalid_request"},
		{"/api/v1/concerts?after=nope", 400, "invalid_request"},
		{"/api/v1/concerts?after=" + first.Next, 400, "invalid_request"},
		{"/api/v1/schedules?after=", 400, "invalid_request"},
		{"/api/v1/schedules?concert=x", 400, "invalid_request"},
		{"/api/v1/schedules?concert=0", 400, "invalid_request"},
		{"/api/v1/schedules?concert=999999", 404, "not_found"},
		{"/api/v1/concerts/x", 400, "invalid_request"},
		{"/api/v1/concerts/999999", 404, "not_found"},
		{"/api/v1/schedules/x", 400, "invalid_request"},
		{"/api/v1/schedules/999999", 404, "not_found"},
	} {
		wantError(t, e, "GET", tc.path, "", tc.status, tc.code)
	}
	wantError(t, e, "DELETE", fmt.Sprintf("/api/v1/concerts/%d", concerts[0]), adminKey, 405, "method_not_allowed")
	wantError(t, e, "POST", "/api/v1/schedules", adminKey, 405, "method_not_allowed")
	wantError(t, e, "PUT", fmt.Sprintf("/api/v1/schedules/%d", all[0]), adminKey, 405, "method_not_allowed")
	// Nothing was created or changed by the refused requests.
	if p := pageAll[wire.ConcertList](t, e, "/api/v1/concerts", "", 500); len(p[0].Concerts) != 3 {
		t.Errorf("concerts after refused requests: %d, want 3", len(p[0].Concerts))
	}
}

// TestReservationsAndSales: the admin key lists a schedule's decided
// reservations page by page and by state, reads its sales, and reads the
// gated seat map, stock and a reservation for support work.
func TestReservationsAndSales(t *testing.T) {
	t.Parallel()
	catalog, err := sqlitebooking.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { catalog.Close() })
	e := newBookingEnvOn(t, memqueue.New(), memhold.New(), catalog)
	sch := e.newSchedule(t, "Sales", `{"starts_at":"2026-03-01T19:00:00Z"}`)
	base := fmt.Sprintf("/api/v1/schedules/%d", sch.ID)
	if r := e.do(nil, "POST", base+"/seats", adminKey, `{"sections":["A"],"rows":1,"seats_per_row":6,"price":50000}`); r.status != 201 {
		t.Fatalf("add seats: %d %s", r.status, r.body)
	}
	if r := e.do(nil, "PUT", base+"/stock", adminKey, `{"total":10}`); r.status != 200 {
		t.Fatalf("set stock: %d %s", r.status, r.body)
	}
	e.putRoom(sch.Room, `{"max_active":100,"admit_rate":100}`)

	// The admin key reads the gated seat map and stock.
	r := e.do(nil, "GET", base+"/seats", adminKey, "")
	seatMap := decodeInto[struct {
		Seats []struct {
			ID int64 `json:"seat_id"`
		} `json:"seats"`
	}](t, r)
	if r.status != 200 || len(seatMap.Seats) != 6 {
		t.Fatalf("seat map with the admin key: %d %s", r.status, r.body)
	}
	if r := e.do(nil, "GET", base+"/stock", adminKey, ""); r.status != 200 {
		t.Errorf("stock with the admin key: %d %s", r.status, r.body)
	}
	wantError(t, e, "GET", base+"/seats", "", 403, "not_admitted") // the gate's answer without a token
	wantError(t, e, "GET", "/api/v1/schedules/999999/seats", adminKey, 404, "not_found")

	// Four visitors buy a seat each; a fifth holds one; a sixth holds stock.
	var resIDs []string
	for i := range 4 {
		v := e.do(nil, "POST", "/api/v1/rooms/"+sch.Room+"/entries", adminKey, fmt.Sprintf(`{"visitor_id":"buyer-%d"}`, i)).entry(t)
		if r := e.do(nil, "POST", base+"/holds", v.Pass, fmt.Sprintf(`{"seat_ids":[%d]}`, seatMap.Seats[i].ID)); r.status != 201 {
			t.Fatalf("hold: %d %s", r.status, r.body)
		}
		r := e.do(nil, "POST", "/api/v1/reservations", v.Pass, fmt.Sprintf(`{"schedule_id":%d,"seat_ids":[%d],"idempotency_key":"k"}`, sch.ID, seatMap.Seats[i].ID))
		if r.status != 202 {
			t.Fatalf("reserve: %d %s", r.status, r.body)
		}
		resIDs = append(resIDs, decodeInto[wire.Reservation](t, r).ReservationID)
	}
	holder := e.do(nil, "POST", "/api/v1/rooms/"+sch.Room+"/entries", adminKey, `{"visitor_id":"holder"}`).entry(t)
	if r := e.do(nil, "POST", base+"/holds", holder.Pass, fmt.Sprintf(`{"seat_ids":[%d]}`, seatMap.Seats[4].ID)); r.status != 201 {
		t.Fatalf("hold: %d %s", r.status, r.body)
	}
	if r := e.do(nil, "POST", base+"/holds", holder.Pass, `{"quantity":3}`); r.status != 201 {
		t.Fatalf("hold stock: %d %s", r.status, r.body)
	}
	// The admin key reads each reservation (support work) until decided.
	for _, id := range resIDs {
		testenv.Eventually(t, time.Minute, "reservation "+id+" decided", func() bool {
			r := e.do(nil, "GET", "/api/v1/reservations/"+id, adminKey, "")
			if r.status != 200 {
				t.Fatalf("reservation with the admin key: %d %s", r.status, r.body)
			}
			got := decodeInto[wire.AdminReservation](t, r)
			if got.Visitor == "" {
				t.Fatalf("reservation with the admin key lacks its visitor: %s", r.body)
			}
			return got.Status == "confirmed"
		})
	}
	// A rejected one, decided in SQL: the first buyer's seat again.
	rejected, err := catalog.Decide(context.Background(), []booking.Reservation{{
		ID: "r-late", Visitor: "late", ScheduleID: sch.ID, SeatIDs: []int64{seatMap.Seats[0].ID}, Status: booking.Pending, CreatedAt: time.Now().UTC().Truncate(time.Microsecond),
	}})
	if err != nil || rejected[0].Status != booking.Rejected {
		t.Fatalf("decide a late reservation: %+v, %v", rejected, err)
	}

	list := func(query string, limit int) []wire.AdminReservation {
		var out []wire.AdminReservation
		for _, p := range pageAll[wire.ReservationList](t, e, base+"/reservations"+query, adminKey, limit) {
			out = append(out, p.Reservations...)
		}
		return out
	}
	ids := func(rs []wire.AdminReservation) []string {
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = r.ReservationID
		}
		return out
	}
	confirmed := slices.Sorted(slices.Values(resIDs))
	everyone := slices.Sorted(slices.Values(append(slices.Clone(resIDs), "r-late")))
	if got := list("", 2); !slices.Equal(ids(got), everyone) {
		t.Errorf("reservations by pages of 2 = %v, want %v (byte order)", ids(got), everyone)
	} else if got[0].Visitor == "" || got[0].CreatedAt.IsZero() || got[0].DecidedAt.IsZero() {
		t.Errorf("a listed reservation lacks its visitor or times: %+v", got[0])
	}
	if got := list("?state=confirmed", 3); !slices.Equal(ids(got), confirmed) {
		t.Errorf("confirmed reservations = %v, want %v", ids(got), confirmed)
	}
	if got := list("?state=rejected", 3); len(got) != 1 || got[0].ReservationID != "r-late" || got[0].Reason != "seat_taken" || got[0].Visitor != "late" {
		t.Errorf("rejected reservations = %+v, want r-late (seat_taken, visitor late)", got)
	}

	r = e.do(nil, "GET", base+"/sales", adminKey, "")
	sales := decodeInto[wire.Sales](t, r)
	want := wire.Sales{
		ScheduleID: sch.ID, Room: sch.Room, Sold: 4, Held: 4, Available: 8, Revenue: ptr(int64(200_000)),
		Seats: &wire.SalesCount{Total: 6, Sold: 4, Held: 1, Available: 1, Revenue: ptr(int64(200_000))},
		Stock: &wire.SalesCount{Total: 10, Sold: 0, Held: 3, Available: 7},
	}
	if sales.AsOf.IsZero() {
		t.Errorf("sales without as_of: %s", r.body)
	}
	sales.AsOf = time.Time{}
	if diff := cmp.Diff(want, sales); r.status != 200 || diff != "" {
		t.Errorf("sales = %d %s, mismatch (-want +got):\n%s", r.status, r.body, diff)
	}

	// Admin only; bad input is 400 and unknown schedules 404.
	for _, path := range []string{base + "/reservations", base + "/sales"} {
		wantError(t, e, "GET", path, "", 401, "admin_unauthorized")
		wantError(t, e, "GET", path, holder.Pass, 401, "admin_unauthorized")
		wantError(t, e, "POST", path, adminKey, 405, "method_not_allowed")
	}
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{base + "/reservations?state=pending", 400, "invalid_request"},
		{base + "/reservations?state=CONFIRMED", 400, "invalid_request"},
		{base + "/reservations?state=", 400, "invalid_request"},
		{base + "/reservations?limit=0", 400, "invalid_request"},
		{base + "/reservations?limit=1000", 400, "invalid_request"},
		{base + "/reservations?after=!!!", 400, "invalid_request"},
		{base + "/reservations?after=" + url.QueryEscape(decodeInto[wire.ConcertList](t, e.do(nil, "GET", "/api/v1/concerts?limit=0", "", "")).Next), 400, "invalid_request"},
		{"/api/v1/schedules/999999/reservations", 404, "not_found"},
		{"/api/v1/schedules/x/reservations", 400, "invalid_request"},
		{"/api/v1/schedules/999999/sales", 404, "not_found"},
		{"/api/v1/schedules/0/sales", 400, "invalid_request"},
	} {
		wantError(t, e, "GET", tc.path, adminKey, tc.status, tc.code)
	}
}

func ptr[T any](v T) *T { return &v }

// TestDeleteRoom: the admin key deletes a room; visitors in it refuse the
// deletion unless forced; a schedule's room is never deleted.
func TestDeleteRoom(t *testing.T) {
	t.Parallel()
	e := newBookingEnv(t)
	e.putRoom("lobby", `{"state":"paused"}`)
	e.do(nil, "POST", "/api/v1/rooms/lobby/entries", adminKey, `{"visitor_id":"v1"}`).entry(t)
	waiting := func() int64 {
		t.Helper()
		r := e.do(nil, "GET", "/api/v1/rooms/lobby", adminKey, "")
		if r.status != 200 {
			t.Fatalf("GET room: %d %s", r.status, r.body)
		}
		return decodeInto[wire.Room](t, r).Stats.Waiting
	}

	wantError(t, e, "DELETE", "/api/v1/rooms/lobby", "", 401, "admin_unauthorized")
	wantError(t, e, "DELETE", "/api/v1/rooms/lobby", "wrong", 401, "admin_unauthorized")
	wantError(t, e, "DELETE", "/api/v1/rooms/lobby", adminKey, 409, "room_in_use")
	wantError(t, e, "DELETE", "/api/v1/rooms/lobby?force=maybe", adminKey, 400, "invalid_request")
	wantError(t, e, "DELETE", "/api/v1/rooms/lobby?force=false", adminKey, 409, "room_in_use")
	wantError(t, e, "DELETE", "/api/v1/rooms/Not_A_Room", adminKey, 400, "invalid_request")
	wantError(t, e, "DELETE", "/api/v1/rooms/nope", adminKey, 404, "room_not_found")
	if n := waiting(); n != 1 {
		t.Fatalf("waiting after refused deletions = %d, want 1 (nothing changed)", n)
	}
	if r := e.do(nil, "DELETE", "/api/v1/rooms/lobby?force=true", adminKey, ""); r.status != 204 {
		t.Fatalf("forced DELETE: %d %s", r.status, r.body)
	}
	wantError(t, e, "GET", "/api/v1/rooms/lobby", adminKey, 404, "room_not_found")
	wantError(t, e, "DELETE", "/api/v1/rooms/lobby", adminKey, 404, "room_not_found")
	r := e.do(nil, "GET", "/api/v1/rooms", adminKey, "")
	for _, room := range decodeInto[wire.RoomList](t, r).Rooms {
		if room.Room == "lobby" {
			t.Errorf("GET /rooms still lists the deleted room: %s", r.body)
		}
	}
	// An empty room needs no force.
	e.putRoom("empty", `{}`)
	if r := e.do(nil, "DELETE", "/api/v1/rooms/empty", adminKey, ""); r.status != 204 {
		t.Errorf("DELETE of an empty room: %d %s", r.status, r.body)
	}

	// A schedule's room: refused, forced or not (the sale service would
	// bring it back).
	sch := e.newSchedule(t, "kept", `{"starts_at":"2026-03-01T19:00:00Z"}`)
	for _, q := range []string{"", "?force=true"} {
		wantError(t, e, "DELETE", "/api/v1/rooms/"+sch.Room+q, adminKey, 409, "room_of_schedule")
	}
	if r := e.do(nil, "GET", "/api/v1/rooms/"+sch.Room, adminKey, ""); r.status != 200 {
		t.Errorf("the schedule's room after refused deletions: %d %s", r.status, r.body)
	}
}
