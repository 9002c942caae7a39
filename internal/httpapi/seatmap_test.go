package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"usher/internal/booking"
	"usher/internal/booking/sqlitebooking"
	"usher/internal/hold/memhold"
	"usher/internal/queue/memqueue"
	"usher/internal/wire"
)

// seatView is one seat as a client sees it, from either form of the map.
type seatView struct {
	Section, Row string
	Number       int
	Price        int64
	Status       string
}

// oldMap reads GET …/seats, the whole map in one JSON.
func oldMap(t *testing.T, e *env, id int64) map[int64]seatView {
	t.Helper()
	r := e.do(nil, "GET", fmt.Sprintf("/api/v1/schedules/%d/seats", id), adminKey, "")
	m := decodeInto[struct {
		Seats []struct {
			ID int64 `json:"seat_id"`
			booking.SeatSpec
			Status string `json:"status"`
		} `json:"seats"`
	}](t, r)
	out := map[int64]seatView{}
	for _, s := range m.Seats {
		out[s.ID] = seatView{s.Section, s.Row, s.Number, s.Price, s.Status}
	}
	return out
}

var stateNames = map[byte]string{wire.SeatAvailable: "AVAILABLE", wire.SeatHeld: "HELD", wire.SeatSold: "SOLD"}

// splitMap reads the layout and the status and joins them as a client
// would.
func splitMap(t *testing.T, e *env, id int64) (map[int64]seatView, wire.SeatMapLayout, wire.SeatMapStatus) {
	t.Helper()
	path := fmt.Sprintf("/api/v1/schedules/%d/seats/", id)
	r := e.do(nil, "GET", path+"status", adminKey, "")
	st := decodeInto[wire.SeatMapStatus](t, r)
	r = e.do(nil, "GET", path+"layout?version="+st.Layout, adminKey, "")
	l := decodeInto[wire.SeatMapLayout](t, r)
	if l.Version != st.Layout {
		t.Fatalf("layout %s, the status names %s", l.Version, st.Layout)
	}
	states, err := wire.UnpackSeatStates(st.Status, st.Seats)
	if err != nil || st.Seats != l.Seats {
		t.Fatalf("status of %d seats for a layout of %d: %v", st.Seats, l.Seats, err)
	}
	out := map[int64]seatView{}
	i := 0
	for _, run := range l.Runs {
		for k := range run.Count {
			out[run.SeatID+int64(k)] = seatView{run.Section, run.Row, run.Number + k, run.Price, stateNames[states[i]]}
			i++
		}
	}
	if i != l.Seats {
		t.Fatalf("runs count %d seats, the layout says %d", i, l.Seats)
	}
	return out, l, st
}

// TestSplitSeatMap: the layout and the status decode to the same seats as
// the whole map, sold and held seats included; each part has a strong
// ETag and answers 304 to it; ?since answers the seats that changed.
func TestSplitSeatMap(t *testing.T) {
	t.Parallel()
	e := newBookingEnv(t)
	sch := e.newSchedule(t, "c", `{}`)
	e.do(nil, "POST", fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID), adminKey, `{"sections":["A","B"],"rows":20,"seats_per_row":20,"price":50000}`)
	e.do(nil, "POST", fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID), adminKey, `{"sections":["C"],"rows":1,"seats_per_row":4,"price":90000}`)
	e.putRoom(sch.Room, `{"max_active":10,"admit_rate":100}`)
	_, _, before := splitMap(t, e, sch.ID)

	alice := e.do(nil, "POST", "/api/v1/rooms/"+sch.Room+"/entries", adminKey, `{"visitor_id":"alice"}`).entry(t)
	bob := e.do(nil, "POST", "/api/v1/rooms/"+sch.Room+"/entries", adminKey, `{"visitor_id":"bob"}`).entry(t)
	holds := fmt.Sprintf("/api/v1/schedules/%d/holds", sch.ID)
	if r := e.do(nil, "POST", holds, alice.Pass, `{"seat_ids":[2,3]}`); r.status != 201 {
		t.Fatalf("hold: %d %s", r.status, r.body)
	}
	r := e.do(nil, "POST", "/api/v1/reservations", alice.Pass, fmt.Sprintf(`{"schedule_id":%d,"seat_ids":[2,3],"idempotency_key":"k1"}`, sch.ID))
	res := decodeInto[wire.Reservation](t, r)
	if last := readEvents(t, e, "/api/v1/reservations/"+res.ReservationID+"/events", alice.Ticket); last.Status != "confirmed" {
		t.Fatalf("reservation %+v, want confirmed", last)
	}
	if r := e.do(nil, "POST", holds, bob.Pass, `{"seat_ids":[17,801]}`); r.status != 201 {
		t.Fatalf("hold: %d %s", r.status, r.body)
	}

	got, l, st := splitMap(t, e, sch.ID)
	want := oldMap(t, e, sch.ID)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layout + status differ from the seat map (-old +split):\n%s", diff)
	}
	if got[2].Status != "SOLD" || got[17].Status != "HELD" || got[1].Status != "AVAILABLE" {
		t.Errorf("seats 1, 2, 17: %v %v %v; want AVAILABLE SOLD HELD", got[1], got[2], got[17])
	}
	if len(l.Runs) != 41 { // 40 rows of A and B, 1 of C
		t.Errorf("%d runs, want 41 (one per row): %+v", len(l.Runs), l.Runs)
	}

	t.Run("changes since", func(t *testing.T) {
		r := e.do(nil, "GET", fmt.Sprintf("/api/v1/schedules/%d/seats/status?since=%s", sch.ID, before.Version), adminKey, "")
		ch := decodeInto[wire.SeatMapStatus](t, r)
		if ch.Since != before.Version || ch.Changes == nil || ch.Status != "" || ch.Version != st.Version {
			t.Fatalf("since %s: %s", before.Version, r.body)
		}
		wantCh := wire.SeatChanges{Available: []int64{}, Held: []int64{17, 801}, Sold: []int64{2, 3}}
		if diff := cmp.Diff(wantCh, *ch.Changes); diff != "" {
			t.Errorf("changes (-want +got):\n%s", diff)
		}
		r = e.do(nil, "GET", fmt.Sprintf("/api/v1/schedules/%d/seats/status?since=unknown", sch.ID), adminKey, "")
		if full := decodeInto[wire.SeatMapStatus](t, r); full.Status != st.Status || full.Changes != nil {
			t.Errorf("since an unknown version: %s, want the full status", r.body)
		}
	})

	t.Run("etags", func(t *testing.T) {
		for _, part := range []string{"layout", "status"} {
			path := fmt.Sprintf("/api/v1/schedules/%d/seats/%s", sch.ID, part)
			for _, enc := range []string{"identity", "gzip"} {
				first := rawGet(t, e, path, adminKey, map[string]string{"Accept-Encoding": enc})
				tag := first.header.Get("ETag")
				if first.status != 200 || !strings.HasPrefix(tag, `"`) || first.header.Get("Cache-Control") == "" {
					t.Fatalf("%s %s: %d ETag %q Cache-Control %q", part, enc, first.status, tag, first.header.Get("Cache-Control"))
				}
				if ce := first.header.Get("Content-Encoding"); (ce == "gzip") != (enc == "gzip") {
					t.Errorf("%s with Accept-Encoding %s: Content-Encoding %q", part, enc, ce)
				}
				again := rawGet(t, e, path, adminKey, map[string]string{"Accept-Encoding": enc, "If-None-Match": tag})
				if again.status != 304 || len(again.body) != 0 || again.header.Get("ETag") != tag {
					t.Errorf("%s %s with If-None-Match %s: %d %q, want 304 and the same ETag", part, enc, tag, again.status, again.header.Get("ETag"))
				}
				stale := rawGet(t, e, path, adminKey, map[string]string{"Accept-Encoding": enc, "If-None-Match": `"other"`})
				if stale.status != 200 {
					t.Errorf("%s with another ETag: %d, want 200", part, stale.status)
				}
			}
		}
		// Rebuilt between the reads (SnapshotEvery 1 ns), an unchanged
		// status keeps its body: one ETag, one body.
		status := fmt.Sprintf("/api/v1/schedules/%d/seats/status", sch.ID)
		a, b := rawGet(t, e, status, adminKey, nil), rawGet(t, e, status, adminKey, nil)
		if a.header.Get("ETag") != b.header.Get("ETag") || string(a.body) != string(b.body) {
			t.Errorf("unchanged status read twice: %s %s and %s %s", a.header.Get("ETag"), a.body, b.header.Get("ETag"), b.body)
		}
		layout := fmt.Sprintf("/api/v1/schedules/%d/seats/layout", sch.ID)
		if cc := rawGet(t, e, layout+"?version="+l.Version, adminKey, nil).header.Get("Cache-Control"); !strings.Contains(cc, "immutable") || !strings.Contains(cc, "public") {
			t.Errorf("layout by its version: Cache-Control %q, want public and immutable", cc)
		}
		for _, p := range []string{layout, layout + "?version=old"} {
			if cc := rawGet(t, e, p, adminKey, nil).header.Get("Cache-Control"); strings.Contains(cc, "immutable") {
				t.Errorf("%s: Cache-Control %q, want it revalidated", p, cc)
			}
		}
	})
}

// TestSeatMapAtStadiumSize bounds the bytes of the two parts at 50,000
// seats: the layout as runs, gzipped, and the status as sent plain.
func TestSeatMapAtStadiumSize(t *testing.T) {
	if testing.Short() {
		t.Skip("50,000 seats in SQLite")
	}
	t.Parallel()
	catalog, err := sqlitebooking.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { catalog.Close() })
	e := newBookingEnvOn(t, memqueue.New(), memhold.New(), catalog)
	for _, tc := range []struct {
		name      string
		price     func(i int) int64 // of the i-th seat
		maxLayout int               // gzipped
	}{
		{"a price per block of rows", func(i int) int64 { return 50_000 + int64(i%1000/250)*30_000 }, 16 << 10},
		{"a price per seat", func(i int) int64 { return 50_000 + int64(i*7919%97)*1_000 }, 300_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sch := e.newSchedule(t, tc.name, `{}`)
			specs := make([]booking.SeatSpec, 50_000)
			for i := range specs {
				specs[i] = booking.SeatSpec{Section: fmt.Sprint("S", i/1000), Row: fmt.Sprint(i%1000/50 + 1), Number: i%50 + 1, Price: tc.price(i)}
			}
			if _, err := catalog.AddSeats(context.Background(), sch.ID, specs); err != nil {
				t.Fatal(err)
			}
			path := fmt.Sprintf("/api/v1/schedules/%d/seats/", sch.ID)
			gz := rawGet(t, e, path+"layout", adminKey, map[string]string{"Accept-Encoding": "gzip"})
			plain := rawGet(t, e, path+"status", adminKey, map[string]string{"Accept-Encoding": "identity"})
			if gz.status != 200 || plain.status != 200 {
				t.Fatalf("layout %d, status %d", gz.status, plain.status)
			}
			var l wire.SeatMapLayout
			if err := json.Unmarshal(gunzip(t, gz.body), &l); err != nil || l.Seats != 50_000 {
				t.Fatalf("layout of %d seats: %v", l.Seats, err)
			}
			t.Logf("layout: %d runs, %d B gzipped; status %d B", len(l.Runs), len(gz.body), len(plain.body))
			if len(gz.body) > tc.maxLayout {
				t.Errorf("layout %d B gzipped, want at most %d", len(gz.body), tc.maxLayout)
			}
			if len(plain.body) > 16<<10 {
				t.Errorf("status %d B, want at most 16 KiB", len(plain.body))
			}
			if !slices.IsSortedFunc(l.Runs, func(a, b wire.SeatRun) int { return int(a.SeatID - b.SeatID) }) {
				t.Error("runs out of seat order")
			}
		})
	}
}

// TestSeatMapPartsTakeASignedPass: the layout and the status take a pass
// for the schedule's room by its signature alone, and refuse what the old
// seat map refuses: no credentials, a pass of another room, a forged one.
// A pass whose slot ended still reads them (no store call), not the old map.
func TestSeatMapPartsTakeASignedPass(t *testing.T) {
	t.Parallel()
	e := newBookingEnv(t)
	sch := e.newSchedule(t, "c", `{}`)
	other := e.newSchedule(t, "d", `{}`)
	e.do(nil, "POST", fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID), adminKey, `{"sections":["A"],"rows":1,"seats_per_row":3}`)
	for _, room := range []string{sch.Room, other.Room} {
		e.putRoom(room, `{"max_active":10,"admit_rate":100}`)
	}
	alice := e.do(nil, "POST", "/api/v1/rooms/"+sch.Room+"/entries", adminKey, `{"visitor_id":"alice"}`).entry(t)
	elsewhere := e.do(nil, "POST", "/api/v1/rooms/"+other.Room+"/entries", adminKey, `{"visitor_id":"bob"}`).entry(t)
	if alice.Pass == "" || elsewhere.Pass == "" {
		t.Fatalf("not admitted: %+v %+v", alice, elsewhere)
	}
	base := fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID)
	// Verified once on its own schedule (and remembered), bob's pass is
	// still another room's pass here.
	if r := e.do(nil, "GET", fmt.Sprintf("/api/v1/schedules/%d/seats/status", other.ID), elsewhere.Pass, ""); r.status != 200 {
		t.Fatalf("status of bob's schedule with his pass: %d %s", r.status, r.body)
	}
	for _, part := range []string{"/layout", "/status"} {
		if r := e.do(nil, "GET", base+part, alice.Pass, ""); r.status != 200 {
			t.Errorf("%s with a pass: %d %s", part, r.status, r.body)
		}
		for name, tok := range map[string]string{"no credentials": "", "another room's pass": elsewhere.Pass, "a forged pass": "t1.nope.nope.nope"} {
			old, got := e.do(nil, "GET", base, tok, ""), e.do(nil, "GET", base+part, tok, "")
			if got.status < 400 || got.status != old.status || got.errorCode(t) != old.errorCode(t) {
				t.Errorf("%s with %s: %d %s; the seat map answers %d %s", part, name, got.status, got.body, old.status, old.body)
			}
		}
	}
	if r := e.do(nil, "DELETE", "/api/v1/rooms/"+sch.Room+"/entries/me", alice.Pass, ""); r.status >= 300 {
		t.Fatalf("leave: %d %s", r.status, r.body)
	}
	if r := e.do(nil, "GET", base+"/status", alice.Pass, ""); r.status != 200 {
		t.Errorf("status with the pass of a slot that ended: %d %s, want 200 until the pass expires", r.status, r.body)
	}
	if r := e.do(nil, "GET", base, alice.Pass, ""); r.status < 400 {
		t.Errorf("seat map with the pass of a slot that ended: %d, want it refused (gated)", r.status)
	}
}
