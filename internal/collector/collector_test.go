package collector_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/analytics"
	"usher/internal/analytics/pganalytics"
	"usher/internal/analytics/sqliteanalytics"
	"usher/internal/collector"
	"usher/internal/event"
	"usher/internal/mq/natsmq"
	"usher/internal/testenv"
)

// connector opens a new connection to the test's NATS server.
type connector func(tb testing.TB) *nats.Conn

func embedded(tb testing.TB) connector {
	srv, err := natsmq.StartEmbedded(testenv.DataDir(tb), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return func(tb testing.TB) *nats.Conn {
		nc, err := natsmq.ConnectEmbedded(srv)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(nc.Close)
		return nc
	}
}

func external(tb testing.TB) connector {
	url := testenv.URL(tb, "USHER_TEST_NATS")
	return func(tb testing.TB) *nats.Conn {
		nc, err := nats.Connect(url)
		if err != nil {
			tb.Fatalf("USHER_TEST_NATS is set but NATS does not answer: %v", err)
		}
		tb.Cleanup(nc.Close)
		return nc
	}
}

func sqliteStore(tb testing.TB) analytics.Store {
	s, err := sqliteanalytics.Open(context.Background(), filepath.Join(tb.TempDir(), "analytics.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func pgStore(tb testing.TB) analytics.Store {
	s, err := pganalytics.Open(context.Background(), testenv.PostgresSchema(tb), 4)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func prefix() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "usher-collect-" + hex.EncodeToString(b)
}

// createStream creates the event stream as a producer would: the plain
// name and filter of package event, a duplicate window of a minute.
func createStream(tb testing.TB, nc *nats.Conn, prefix string) jetstream.Stream {
	tb.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: event.StreamName(prefix), Subjects: []string{event.SubjectFilter(prefix)},
		Storage: jetstream.FileStorage, Duplicates: time.Minute,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, event.StreamName(prefix)); err != nil && !nc.IsClosed() {
			tb.Logf("delete stream: %v", err)
		}
	})
	return s
}

// publish publishes events in order (asynchronously, then waits for every
// acknowledgement); withID sets Nats-Msg-Id. It returns how many the
// broker acknowledged as duplicates.
func publish(tb testing.TB, nc *nats.Conn, prefix string, evs []event.Event, withID bool) int {
	tb.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	var acks []jetstream.PubAckFuture
	for _, e := range evs {
		body, _ := json.Marshal(e)
		var opts []jetstream.PublishOpt
		if withID {
			opts = append(opts, jetstream.WithMsgID(e.ID))
		}
		f, err := js.PublishAsync(event.Subject(prefix, e.Room, e.Type), body, opts...)
		if err != nil {
			tb.Fatalf("publish: %v", err)
		}
		acks = append(acks, f)
	}
	dups := 0
	for _, f := range acks {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				dups++
			}
		case err := <-f.Err():
			tb.Fatalf("publish: %v", err)
		case <-time.After(30 * time.Second):
			tb.Fatal("publish: no acknowledgement in 30 s")
		}
	}
	return dups
}

// truth is what the analytics must count, computed from the published
// events without package analytics.
type truth map[string]analytics.Counts

// workload makes rooms × visitors of entries, admissions, abandons, holds
// and reservations, each visitor's events in the order they happen, at
// millisecond times of the last hour; and the truth about them.
func workload(rooms, visitors int) ([]event.Event, truth) {
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	want := truth{}
	var evs []event.Event
	add := func(e event.Event, d *event.Data) {
		e.ID = fmt.Sprintf("%s-%d", e.Room, len(evs))
		if d != nil {
			e.Data, _ = json.Marshal(d)
		}
		evs = append(evs, e)
	}
	for r := range rooms {
		room := fmt.Sprintf("room-%d", r)
		c := want[room]
		for i := range visitors {
			v := fmt.Sprintf("v%d", i)
			in := t0.Add(time.Duration(i*37) * time.Millisecond)
			eta := int64(1000 + i*13)
			add(event.Event{Type: event.Entered, Room: room, At: in, Visitor: v}, &event.Data{ETAMS: eta})
			c.Arrivals++
			switch i % 5 {
			case 0: // gives up waiting
				add(event.Event{Type: event.Left, Room: room, At: in.Add(time.Second), Visitor: v}, &event.Data{From: "waiting"})
				c.Abandons++
				continue
			case 1: // still waiting at the end
				continue
			}
			wait := time.Duration(500+(i*7919)%90_000) * time.Millisecond
			add(event.Event{Type: event.Admitted, Room: room, At: in.Add(wait), Visitor: v}, nil)
			c.Admissions++
			c.Waits++
			c.WaitSumMS += wait.Milliseconds()
			c.ETAs++
			c.ETAErrSumMS += wait.Milliseconds() - eta
			c.ETAAbsErrSumMS += max(wait.Milliseconds()-eta, eta-wait.Milliseconds())
			at := in.Add(wait + time.Second)
			add(event.Event{Type: event.HoldPlaced, Room: room, At: at, Visitor: v}, &event.Data{Schedule: 1, Units: 1})
			c.HoldsPlaced++
			add(event.Event{Type: event.ReservationSubmitted, Room: room, At: at.Add(time.Second), Visitor: v}, &event.Data{Reservation: "r" + v, Units: 1})
			c.Submitted++
			if i%5 == 4 {
				add(event.Event{Type: event.ReservationRejected, Room: room, At: at.Add(2 * time.Second), Visitor: v}, &event.Data{Reservation: "r" + v})
				c.Rejected++
				add(event.Event{Type: event.HoldReleased, Room: room, At: at.Add(3 * time.Second), Visitor: v}, &event.Data{Schedule: 1, Units: 1})
				c.HoldsReleased++
				continue
			}
			add(event.Event{Type: event.ReservationConfirmed, Room: room, At: at.Add(2 * time.Second), Visitor: v}, &event.Data{Reservation: "r" + v, Units: 1, Amount: 50_000})
			c.Confirmed++
			c.Revenue += 50_000
			add(event.Event{Type: event.Left, Room: room, At: at.Add(3 * time.Second), Visitor: v}, &event.Data{From: "active"})
			c.LeftActive++
		}
		add(event.Event{Type: event.Skipped, Room: room, At: t0.Add(time.Minute)}, &event.Data{Count: 7, Removed: 3})
		c.Abandons += 3
		add(event.Event{Type: event.Expired, Room: room, At: t0.Add(2 * time.Minute)}, &event.Data{Count: 5})
		c.Expired += 5
		add(event.Event{Type: event.HoldExpired, Room: room, At: t0.Add(3 * time.Minute), Visitor: "v3"}, &event.Data{Schedule: 1, Units: 2})
		c.HoldsExpired++
		add(event.Event{Type: event.SettingsChanged, Room: room, At: t0.Add(4 * time.Minute)}, &event.Data{Who: "admin", Old: json.RawMessage(`{"rate":10}`), New: json.RawMessage(`{"rate":20}`)})
		want[room] = c
	}
	// The stream's order: by time, as the instances would publish them
	// (stable: a visitor's events keep their order).
	slices.SortStableFunc(evs, func(a, b event.Event) int { return a.At.Compare(b.At) })
	return evs, want
}

// counted reads every room's totals.
func counted(tb testing.TB, a *analytics.Analytics, want truth) truth {
	tb.Helper()
	got, err := read(a, want)
	if err != nil {
		tb.Fatalf("Report: %v", err)
	}
	return got
}

func read(a *analytics.Analytics, want truth) (truth, error) {
	got := truth{}
	for room := range want {
		from := time.Now().Add(-2 * time.Hour)
		rep, err := a.Report(context.Background(), room, from, from.Add(3*time.Hour))
		if err != nil {
			return nil, err
		}
		got[room] = rep.Totals.Counts
	}
	return got, nil
}

func total(t truth) (n int64) {
	for _, c := range t {
		n += c.Arrivals + c.Admissions
	}
	return n
}

// logBuffer is a slog destination the test reads.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *logBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

type running struct {
	cancel context.CancelFunc
	done   chan error
	reg    *prometheus.Registry
}

func start(tb testing.TB, nc *nats.Conn, a *analytics.Analytics, prefix string, log *slog.Logger) *running {
	tb.Helper()
	reg := prometheus.NewRegistry()
	c, err := collector.New(nc, a, collector.Options{
		Prefix: prefix, Batch: 64, AckWait: 500 * time.Millisecond, FetchWait: 100 * time.Millisecond,
		RetryAfter: 50 * time.Millisecond, Registerer: reg, Logger: log,
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1), reg: reg}
	go func() { r.done <- c.Run(ctx) }()
	tb.Cleanup(func() { cancel(); <-r.done })
	return r
}

func (r *running) wait(tb testing.TB) error {
	tb.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(30 * time.Second):
		tb.Fatal("the collector did not return within 30 s")
		return nil
	}
}

func (r *running) events(outcome string) float64 {
	m, err := r.reg.Gather()
	if err != nil {
		return -1
	}
	for _, f := range m {
		if f.GetName() == "usher_collect_events_total" {
			for _, s := range f.GetMetric() {
				if s.GetLabel()[0].GetValue() == outcome {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// testKillRestart is the test: collectors killed while events
// flow (by cancelling one, by closing another's connection), a batch
// counted and never acknowledged, duplicates published with and without
// the same Nats-Msg-Id; after a restart every event is counted exactly
// once.
func testKillRestart(t *testing.T, conn connector, store analytics.Store) {
	p := prefix()
	pub := conn(t)
	a := analytics.New(store, analytics.Options{})
	evs, want := workload(3, 150)
	stream := createStream(t, pub, p)
	third := len(evs) / 3
	log := slog.New(slog.NewTextHandler(&logBuffer{}, nil))

	// 1. A collector runs while the first third is published; it is
	// cancelled once it counted some.
	first := start(t, conn(t), a, p, log)
	published := make(chan struct{})
	go func() { publish(t, pub, p, evs[:third], true); close(published) }()
	testenv.Eventually(t, 30*time.Second, "the first collector to count some events", func() bool { return total(counted(t, a, want)) > 0 })
	first.cancel()
	if err := first.wait(t); err != nil {
		t.Fatalf("cancelled collector: Run = %v, want nil", err)
	}
	<-published

	// 2. A batch is fetched by the collector's consumer and counted, but
	// never acknowledged: a collector that died between its commit and its
	// ack. The server delivers it again after AckWait. The batch is
	// published now, with no collector running, so that it exists however
	// much of the first third the first collector took (all of it, on a
	// fast run: the test then failed for want of a batch).
	tail := third + 20
	publish(t, pub, p, evs[third:tail], true)
	js, _ := jetstream.New(pub)
	cons, err := js.Consumer(context.Background(), event.StreamName(p), "collector")
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(20, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var unacked []event.Event
	for m := range batch.Messages() {
		var e event.Event
		if err := json.Unmarshal(m.Data(), &e); err != nil {
			t.Fatal(err)
		}
		unacked = append(unacked, e)
	}
	if len(unacked) == 0 {
		t.Fatal("fetched nothing of the 20 events published with no collector running")
	}
	if res, err := a.Apply(context.Background(), unacked); err != nil || res.Applied+res.Duplicate != len(unacked) {
		t.Fatalf("apply the unacknowledged batch: %+v, %v", res, err)
	}

	// 3. A second collector runs while the second third is published, and
	// its connection is closed under it.
	nc2 := conn(t)
	second := start(t, nc2, a, p, log)
	published = make(chan struct{})
	go func() { publish(t, pub, p, evs[tail:2*third], true); close(published) }()
	before := total(counted(t, a, want))
	testenv.Eventually(t, 30*time.Second, "the second collector to count more", func() bool { return total(counted(t, a, want)) > before })
	nc2.Close()
	if err := second.wait(t); err == nil || !strings.Contains(err.Error(), "connection closed") {
		t.Errorf("collector whose connection closed: Run = %v, want a connection closed error", err)
	}
	<-published

	// 4. The rest, and duplicates: republished with the same Msg-Id (the
	// broker drops them) and without one (the relay after the duplicate
	// window: the stream holds them twice).
	publish(t, pub, p, evs[2*third:], true)
	dups := evs[:40]
	if n := publish(t, pub, p, dups, true); n != len(dups) {
		t.Errorf("the broker dropped %d of %d re-publications with the same Msg-Id", n, len(dups))
	}
	publish(t, pub, p, dups, false)
	info, err := stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := info.State.Msgs, uint64(len(evs)+len(dups)); got != want {
		t.Fatalf("stream holds %d messages, want %d (every event once, %d twice)", got, want, len(dups))
	}

	// 5. A third collector takes it to the end.
	third3 := start(t, conn(t), a, p, log)
	testenv.Eventually(t, 60*time.Second, "every event acknowledged", func() bool {
		ci, err := cons.Info(context.Background())
		return err == nil && ci.NumPending == 0 && ci.NumAckPending == 0 && ci.NumRedelivered == 0
	})
	if diff := cmp.Diff(want, counted(t, a, want)); diff != "" {
		t.Errorf("analytics differ from the published truth (-want +got):\n%s", diff)
	}
	if got := third3.events("duplicate") + second.events("duplicate"); got < float64(len(dups)+len(unacked)) {
		t.Errorf("the collectors saw %v duplicates, want at least %d (re-published) + %d (redelivered)", got, len(dups), len(unacked))
	}
	// The timeline holds each event once.
	page, _, err := a.Events(context.Background(), "room-0", 0, analytics.MaxEvents)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range page {
		if seen[e.ID] {
			t.Errorf("timeline holds %s twice", e.ID)
		}
		seen[e.ID] = true
	}
}

func TestKillRestartSQLite(t *testing.T) {
	t.Parallel()
	testKillRestart(t, embedded(t), sqliteStore(t))
}

func TestKillRestartPostgres(t *testing.T) {
	t.Parallel()
	testKillRestart(t, embedded(t), pgStore(t))
}

func TestKillRestartExternalNATS(t *testing.T) {
	t.Parallel()
	testKillRestart(t, external(t), sqliteStore(t))
}

// TestWaitsForStream: a collector started before any producer created the
// stream says so, keeps trying, and counts once the stream exists.
func TestWaitsForStream(t *testing.T) {
	t.Parallel()
	conn := embedded(t)
	p := prefix()
	a := analytics.New(sqliteStore(t), analytics.Options{})
	logs := &logBuffer{}
	r := start(t, conn(t), a, p, slog.New(slog.NewTextHandler(logs, nil)))
	testenv.Eventually(t, 30*time.Second, "a log line saying the stream is missing", func() bool {
		return strings.Contains(logs.String(), "event stream not found") && strings.Contains(logs.String(), event.StreamName(p))
	})
	select {
	case err := <-r.done:
		t.Fatalf("Run returned %v without a stream; want it to wait", err)
	default:
	}
	pub := conn(t)
	createStream(t, pub, p)
	evs, want := workload(1, 20)
	publish(t, pub, p, evs, true)
	testenv.Eventually(t, 30*time.Second, "the events counted", func() bool { return cmp.Equal(want, counted(t, a, want)) })
}

// TestMalformed: a message that is not an event is terminated and counted
// as malformed; the events around it count.
func TestMalformed(t *testing.T) {
	t.Parallel()
	conn := embedded(t)
	p := prefix()
	pub := conn(t)
	createStream(t, pub, p)
	a := analytics.New(sqliteStore(t), analytics.Options{})
	evs, want := workload(1, 10)
	publish(t, pub, p, evs[:5], true)
	if err := pub.Publish(event.Subject(p, "room-0", event.Entered), []byte("not json")); err != nil {
		t.Fatal(err)
	}
	bad, _ := json.Marshal(event.Event{ID: "", Type: event.Entered, Room: "room-0", At: time.Now()})
	if err := pub.Publish(event.Subject(p, "room-0", event.Entered), bad); err != nil {
		t.Fatal(err)
	}
	publish(t, pub, p, evs[5:], true)
	r := start(t, conn(t), a, p, nil)
	testenv.Eventually(t, 30*time.Second, "the events counted and the two malformed ones terminated", func() bool {
		return cmp.Equal(want, counted(t, a, want)) && r.events("malformed") == 2
	})
}

// TestDatabaseOutage: PostgreSQL's connections are cut while events flow;
// the batches that fail change nothing and come again, and once the
// database is back every event is counted once.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	base := testenv.PostgresSchema(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	s, err := pganalytics.Open(context.Background(), u.String(), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	a := analytics.New(s, analytics.Options{})

	conn := embedded(t)
	p := prefix()
	pub := conn(t)
	createStream(t, pub, p)
	logs := &logBuffer{}
	r := start(t, conn(t), a, p, slog.New(slog.NewTextHandler(logs, nil)))
	evs, want := workload(2, 100)
	half := len(evs) / 2
	publish(t, pub, p, evs[:half], true)
	testenv.Eventually(t, 30*time.Second, "some events counted", func() bool { return total(counted(t, a, want)) > 0 })
	proxy.Cut()
	publish(t, pub, p, evs[half:], true)
	testenv.Eventually(t, 30*time.Second, "a batch failing on the cut database", func() bool {
		return strings.Contains(logs.String(), "batch failed")
	})
	proxy.Restore(t)
	// The pool may hand the first reads a connection the cut broke
	// (unavailable): those are "not yet".
	testenv.Eventually(t, 60*time.Second, "every event counted after the outage", func() bool {
		got, err := read(a, want)
		return err == nil && cmp.Equal(want, got)
	})
	// A batch whose commit reached the server while its answer was cut
	// off is counted and reported failed; it comes again as duplicates.
	if got := r.events("applied") + r.events("duplicate"); got < float64(len(evs)) || r.events("applied") > float64(len(evs)) {
		t.Errorf("applied %v and duplicate %v events of %d", r.events("applied"), r.events("duplicate"), len(evs))
	}
}
