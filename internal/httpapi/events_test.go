package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/event"
	"usher/internal/event/natsevent"
	"usher/internal/hist"
	"usher/internal/httpapi"
	"usher/internal/mq/natsmq"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/testenv"
	"usher/internal/token"
	"usher/internal/wire"
)

// eventStream starts an embedded NATS server of the test's own, the event
// stream on it and a running Publisher; it returns the publisher and the
// stream.
func eventStream(tb testing.TB, reg prometheus.Registerer) (*natsevent.Publisher, jetstream.Stream) {
	tb.Helper()
	srv, err := natsmq.StartEmbedded(testenv.DataDir(tb), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := natsmq.ConnectEmbedded(srv)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return runPublisher(tb, nc, reg)
}

func runPublisher(tb testing.TB, nc *nats.Conn, reg prometheus.Registerer) (*natsevent.Publisher, jetstream.Stream) {
	tb.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := natsevent.EnsureStream(context.Background(), js, "usher", 1)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := natsevent.NewPublisher(nc, natsevent.PublisherOptions{Metrics: natsevent.NewMetrics(reg)})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })
	return p, st
}

// streamEvents reads every event in the stream.
func streamEvents(tb testing.TB, st jetstream.Stream) []event.Event {
	tb.Helper()
	ctx := context.Background()
	info, err := st.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	var out []event.Event
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			tb.Fatal(err)
		}
		var e event.Event
		if err := json.Unmarshal(m.Data, &e); err != nil {
			tb.Fatal(err)
		}
		if m.Subject != event.Subject("usher", e.Room, e.Type) || m.Header.Get(jetstream.MsgIDHeader) != e.ID {
			tb.Errorf("event %+v on %s, Nats-Msg-Id %q", e, m.Subject, m.Header.Get(jetstream.MsgIDHeader))
		}
		out = append(out, e)
	}
	return out
}

// TestEventsPublished drives the API of an instance whose queue and API
// publish to an embedded NATS: the room's settings changes arrive in the
// stream, and a new place, a passthrough entry and a leave as one counted
// event, with their fields.
func TestEventsPublished(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	pub, st := eventStream(t, reg)
	q := queue.New(memqueue.New(), queue.Options{Events: pub})
	keys, err := token.LoadDir(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(httpapi.NewServer(httpapi.Config{Queue: q, Keys: keys, AdminKey: adminKey, Registry: reg, Events: pub}))
	t.Cleanup(srv.Close)
	e := &env{t: t, srv: srv, q: q, keys: keys}

	if r := e.do(nil, "PUT", "/api/v1/rooms/ev", adminKey, `{"state":"open","max_active":1}`); r.status != 201 {
		t.Fatalf("create room: %d %s", r.status, r.body)
	}
	if r := e.do(nil, "PUT", "/api/v1/rooms/ev", adminKey, `{"admit_rate":7}`); r.status != 200 {
		t.Fatalf("change room: %d %s", r.status, r.body)
	}
	for _, v := range []string{"alice", "bob"} { // alice passes through, bob waits
		if r := e.do(nil, "POST", "/api/v1/rooms/ev/entries", adminKey, `{"visitor_id":"`+v+`"}`); r.status != 201 {
			t.Fatalf("enter %s: %d %s", v, r.status, r.body)
		}
	}
	e.do(nil, "POST", "/api/v1/rooms/ev/entries", adminKey, `{"visitor_id":"bob"}`) // again: not an entry
	bob := keys.SignTicket(token.Ticket{Room: "ev", Visitor: "bob", Seq: 2, IssuedAt: time.Now()})
	if r := e.do(nil, "DELETE", "/api/v1/rooms/ev/entries/me", bob, ""); r.status != 204 {
		t.Fatalf("leave: %d %s", r.status, r.body)
	}

	q.FlushCounts() // what RunCounts does every second

	var got []event.Event
	testenv.Eventually(t, 20*time.Second, "3 events in the stream", func() bool {
		got = streamEvents(t, st)
		return len(got) >= 3
	})
	var summary []string
	for _, ev := range got {
		summary = append(summary, string(ev.Type)+" "+ev.Visitor)
	}
	want := []string{"settings_changed ", "settings_changed ", "counted "}
	if diff := cmp.Diff(want, summary); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	var created, changed, counted event.Data
	for i, d := range []*event.Data{&created, &changed, &counted} {
		if err := json.Unmarshal(got[i].Data, d); err != nil {
			t.Fatal(err)
		}
	}
	// Two new places (bob's second entry is none), alice admitted at
	// once (a wait of 0), bob left from the line.
	wantCounted := event.Data{Arrivals: 2, Admissions: 1, Abandons: 1, Waits: 1, WaitHist: map[int]int64{hist.MinBucket: 1}} // the passthrough waited 0
	if diff := cmp.Diff(wantCounted, counted); diff != "" {
		t.Errorf("counted (-want +got):\n%s", diff)
	}
	var before, after wire.RoomSettings
	if err := json.Unmarshal(changed.Old, &before); err != nil {
		t.Fatalf("old settings %s: %v", changed.Old, err)
	}
	if err := json.Unmarshal(changed.New, &after); err != nil {
		t.Fatalf("new settings %s: %v", changed.New, err)
	}
	switch {
	case created.Who != "admin" || created.Old != nil || created.New == nil:
		t.Errorf("a new room's settings_changed = %+v: want who admin, no old, the new settings", created)
	case changed.Who != "admin" || setting[float64](before, "admit_rate") != 50 || setting[float64](after, "admit_rate") != 7 || setting[int64](after, "max_active") != 1:
		t.Errorf("settings_changed = %s → %s, want admit_rate 50 → 7", changed.Old, changed.New)
	}
}
