package wire_test

import (
	"encoding/json"
	"testing"
	"time"

	"usher/internal/wire"
)

// TestEntryJSON pins that the hand-written encoder agrees with encoding/json.
func TestEntryJSON(t *testing.T) {
	exp := time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)
	for _, e := range []wire.Entry{
		{},
		{Room: "sale", Ticket: "t1.abc.def.ghi", State: "waiting", RoomState: "open", Position: 1500, Ahead: 1499, ETASeconds: 36, PollAfterMS: 7300},
		{Room: "r", State: "admitted", RoomState: "paused", Pass: "eyJ.x.y", PassExpiresAt: &exp, Position: -1},
		{Room: "quote\"back\\slash<>&\u00e9\u2028\x01", State: "expired"},
		{Room: "r", State: "waiting", RoomState: "pre_queue", ETASeconds: 60, PollAfterMS: 7000, OpensAt: &exp},
		{Room: "r", State: "waiting", RoomState: "open", Position: 400, Ahead: 399, ETASeconds: 26, ETARangeSeconds: [2]int64{22, 31}, PollAfterMS: 2600},
		{Room: "r", State: "waiting", RoomState: "open", Position: 4, ETASeconds: 600, ETAText: "약 8–12분 \"남음\"", PollAfterMS: 1500},
	} {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("AppendJSON = %s\nencoding/json = %s", got, want)
		}
	}
}

func TestEntryFor(t *testing.T) {
	exp := time.Date(2026, 11, 29, 10, 0, 7, 997771640, time.FixedZone("KST", 9*3600))
	expUTC := time.Date(2026, 11, 29, 1, 0, 7, 0, time.UTC)
	expPre := exp.UTC() // opens_at keeps its milliseconds
	for _, tc := range []struct {
		name string
		in   wire.Place
		want wire.Entry
	}{
		{"waiting", wire.Place{Room: "r", Ticket: "t", RoomState: "open", Status: "waiting", Position: 4, ETA: 2600 * time.Millisecond, PollAfter: 1522 * time.Millisecond},
			wire.Entry{Room: "r", Ticket: "t", State: "waiting", RoomState: "open", Position: 4, Ahead: 3, ETASeconds: 3, PollAfterMS: 1522}},
		{"waiting, with a range", wire.Place{Room: "r", RoomState: "open", Status: "waiting", Position: 400, ETA: 26400 * time.Millisecond, ETALow: 22900 * time.Millisecond, ETAHigh: 30100 * time.Millisecond, PollAfter: 2600 * time.Millisecond},
			wire.Entry{Room: "r", State: "waiting", RoomState: "open", Position: 400, Ahead: 399, ETASeconds: 26, ETARangeSeconds: [2]int64{22, 31}, PollAfterMS: 2600}},
		{"pre-queue: no range", wire.Place{Room: "r", RoomState: "pre_queue", Status: "waiting", ETA: 90 * time.Second, ETALow: time.Second, ETAHigh: 2 * time.Second, PollAfter: 8 * time.Second, OpensAt: exp},
			wire.Entry{Room: "r", State: "waiting", RoomState: "pre_queue", ETASeconds: 90, PollAfterMS: 8000, OpensAt: &expPre}},
		{"waiting, paused", wire.Place{Room: "r", RoomState: "paused", Status: "waiting", Position: 1, PollAfter: time.Second},
			wire.Entry{Room: "r", State: "waiting", RoomState: "paused", Position: 1, PollAfterMS: 1000}},
		{"waiting, closed", wire.Place{Room: "r", RoomState: "closed", Status: "waiting", Position: 2, PollAfter: time.Second},
			wire.Entry{Room: "r", State: "closed", RoomState: "closed", Position: 2, Ahead: 1, PollAfterMS: 1000}},
		{"waiting, sold out", wire.Place{Room: "r", RoomState: "sold_out", Status: "waiting", Position: 2, PollAfter: time.Second},
			wire.Entry{Room: "r", State: "sold_out", RoomState: "sold_out", Position: 2, Ahead: 1, PollAfterMS: 1000}},
		{"active", wire.Place{Room: "r", RoomState: "open", Status: "active", Position: 9, PollAfter: time.Second, Pass: "p", PassExpiresAt: exp},
			wire.Entry{Room: "r", State: "admitted", RoomState: "open", Pass: "p", PassExpiresAt: &expUTC}},
		{"active, sold out", wire.Place{Room: "r", RoomState: "sold_out", Status: "active", Pass: "p", PassExpiresAt: exp},
			wire.Entry{Room: "r", State: "admitted", RoomState: "sold_out", Pass: "p", PassExpiresAt: &expUTC}},
		{"gone: nothing to poll for", wire.Place{Room: "r", RoomState: "open", Status: "gone", Position: 3, PollAfter: time.Second},
			wire.Entry{Room: "r", State: "expired", RoomState: "open"}},
		{"gone, sold out", wire.Place{Room: "r", RoomState: "sold_out", Status: "gone", PollAfter: time.Second},
			wire.Entry{Room: "r", State: "sold_out", RoomState: "sold_out"}},
		{"pre-queue", wire.Place{Room: "r", RoomState: "pre_queue", Status: "waiting", ETA: 90 * time.Second, PollAfter: 8 * time.Second, OpensAt: exp},
			wire.Entry{Room: "r", State: "waiting", RoomState: "pre_queue", ETASeconds: 90, PollAfterMS: 8000, OpensAt: &expPre}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := wire.EntryFor(tc.in)
			gotJSON, wantJSON := got.AppendJSON(nil), tc.want.AppendJSON(nil)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("EntryFor(%+v)\n got %s\nwant %s", tc.in, gotJSON, wantJSON)
			}
		})
	}
}

func TestRoomCookies(t *testing.T) {
	if got := wire.RoomTicketCookie("sale"); got == wire.TicketCookie || got != "usher_ticket_sale" {
		t.Errorf("RoomTicketCookie(sale) = %q, want usher_ticket_sale, distinct from the API's %q", got, wire.TicketCookie)
	}
	if got := wire.RoomStartCookie("sale"); got != "usher_start_sale" {
		t.Errorf("RoomStartCookie(sale) = %q", got)
	}
}

func TestPackSeatStates(t *testing.T) {
	for _, n := range []int{0, 1, 4, 5, 6, 11, 50_000} {
		states := make([]byte, n)
		for i := range states {
			states[i] = byte((i*7 + i/3) % 3)
		}
		packed := wire.PackSeatStates(states)
		got, err := wire.UnpackSeatStates(packed, n)
		if err != nil || string(got) != string(states) {
			t.Errorf("%d seats: unpack(pack) = %v, %v", n, err, got)
		}
		if n == 50_000 && len(packed) > 13_336 {
			t.Errorf("50,000 seats packed in %d characters, want at most 13,336", len(packed))
		}
	}
	if _, err := wire.UnpackSeatStates("/w==", 5); err == nil { // 0xff: above 3^5-1
		t.Error("unpack of a byte above 242: no error")
	}
}
