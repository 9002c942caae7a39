package natsevent_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/booking"
	"usher/internal/booking/pgbooking"
	"usher/internal/booking/sqlitebooking"
	"usher/internal/event"
	"usher/internal/event/eventtest"
	"usher/internal/event/natsevent"
	"usher/internal/mq/natsmq"
	"usher/internal/testenv"
)

// embedded starts a NATS server of the test's own (in-process, JetStream
// in a temporary directory) and connects to it.
func embedded(tb testing.TB) *nats.Conn {
	tb.Helper()
	s, err := natsmq.StartEmbedded(testenv.DataDir(tb), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	nc, err := natsmq.ConnectEmbedded(s)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// external connects to USHER_TEST_NATS (skips when unset, fails under CI
// or when the server does not answer).
func external(tb testing.TB) *nats.Conn {
	tb.Helper()
	u := testenv.URL(tb, "USHER_TEST_NATS")
	nc, err := nats.Connect(u, nats.Timeout(5*time.Second), nats.Name("usher natsevent test"))
	if err != nil {
		tb.Fatalf("USHER_TEST_NATS is set but NATS at %s does not answer: %v", u, err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// stream creates the event stream under a prefix of the test's own and
// deletes it when the test ends.
func stream(tb testing.TB, nc *nats.Conn) (string, jetstream.Stream) {
	tb.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	prefix := "evtest-" + hex.EncodeToString(b)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := natsevent.EnsureStream(ctx, js, prefix, 1)
	if err != nil {
		tb.Fatalf("EnsureStream: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, event.StreamName(prefix)); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			tb.Errorf("delete stream: %v", err)
		}
	})
	return prefix, st
}

// received is one message of the stream.
type received struct {
	Subject, MsgID string
	Event          event.Event
}

// messages reads every message of the stream, in order.
func messages(tb testing.TB, st jetstream.Stream) []received {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := st.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	var out []received
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			tb.Fatalf("GetMsg(%d): %v", seq, err)
		}
		var e event.Event
		if err := json.Unmarshal(m.Data, &e); err != nil {
			tb.Fatalf("message %d: %v: %s", seq, err, m.Data)
		}
		out = append(out, received{m.Subject, m.Header.Get(jetstream.MsgIDHeader), e})
	}
	return out
}

func count(tb testing.TB, st jetstream.Stream) uint64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := st.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return info.State.Msgs
}

func TestEnsureStream(t *testing.T) {
	t.Parallel()
	nc := embedded(t)
	prefix, st := stream(t, nc)
	js, _ := jetstream.New(nc)
	// Again: the same stream, unchanged.
	again, err := natsevent.EnsureStream(context.Background(), js, prefix, 1)
	if err != nil {
		t.Fatalf("EnsureStream again: %v", err)
	}
	cfg := again.CachedInfo().Config
	if cfg.Name != st.CachedInfo().Config.Name || cfg.Name != event.StreamName(prefix) {
		t.Errorf("stream %q, want %q", cfg.Name, event.StreamName(prefix))
	}
	if diff := cmp.Diff([]string{event.SubjectFilter(prefix)}, cfg.Subjects); diff != "" {
		t.Errorf("subjects (-want +got):\n%s", diff)
	}
	if cfg.MaxAge != natsevent.StreamMaxAge || cfg.Duplicates != natsevent.StreamDuplicates || cfg.Storage != jetstream.FileStorage ||
		cfg.Retention != jetstream.LimitsPolicy || cfg.Replicas != 1 || cfg.PersistMode != jetstream.AsyncPersistMode {
		t.Errorf("config %+v: want max age %v, duplicates %v, file storage, limits retention, 1 replica, async persist",
			cfg, natsevent.StreamMaxAge, natsevent.StreamDuplicates)
	}
	if _, err := natsevent.EnsureStream(context.Background(), js, "bad.name", 1); err == nil {
		t.Error("EnsureStream(bad.name): want an error")
	}
}

func testEvent(i int) event.Event {
	return event.New(event.Entered, fmt.Sprintf("room-%d", i%3), fmt.Sprintf("v%d", i),
		time.Date(2026, 12, 1, 20, 0, 0, i*1000, time.UTC), event.Data{ETAMS: int64(1000 + i)})
}

// TestConformance runs the publishers' suite on the embedded server and on
// USHER_TEST_NATS.
func TestConformance(t *testing.T) {
	t.Parallel()
	for name, connect := range map[string]func(testing.TB) *nats.Conn{"embedded": embedded, "external": external} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			eventtest.Run(t, backend(connect))
		})
	}
}

// BenchmarkPublisher is eventtest.Bench on the embedded server (compare
// with kafkaevent's on kfake: the ratio, not the figure, is the point).
func BenchmarkPublisher(b *testing.B) { eventtest.Bench(b, backend(embedded)) }

// backend is a stream of the test's own on connect's server.
func backend(connect func(testing.TB) *nats.Conn) func(testing.TB) eventtest.Backend {
	return func(tb testing.TB) eventtest.Backend {
		nc := connect(tb)
		prefix, st := stream(tb, nc)
		return eventtest.Backend{
			NewPublisher: func(tb testing.TB, buffer int, reg prometheus.Registerer) eventtest.Publisher {
				p, err := natsevent.NewPublisher(nc, natsevent.PublisherOptions{Prefix: prefix, Buffer: buffer, Metrics: natsevent.NewMetrics(reg)})
				if err != nil {
					tb.Fatal(err)
				}
				return p
			},
			Published: func(tb testing.TB) []event.Event {
				var out []event.Event
				for _, m := range messages(tb, st) {
					if m.MsgID != m.Event.ID || m.Subject != event.Subject(prefix, m.Event.Room, m.Event.Type) {
						tb.Errorf("event %s on %s with Nats-Msg-Id %q", m.Event.ID, m.Subject, m.MsgID)
					}
					out = append(out, m.Event)
				}
				return out
			},
		}
	}
}

// metrics registers the metrics with a registry of the test's own.
func metrics() (*natsevent.Metrics, *prometheus.Registry) {
	reg := prometheus.NewPedanticRegistry()
	return natsevent.NewMetrics(reg), reg
}

// publishedTotal and droppedTotal read the counters from reg.
func publishedTotal(tb testing.TB, reg *prometheus.Registry, source string) float64 {
	tb.Helper()
	return eventtest.Counter(tb, reg, "usher_events_published_total", "source", source)
}

func droppedTotal(tb testing.TB, reg *prometheus.Registry, reason string) float64 {
	tb.Helper()
	return eventtest.Counter(tb, reg, "usher_events_dropped_total", "reason", reason)
}

// TestPublisherCounted: Offer with the buffer full refuses without
// counting a drop (the producer keeps its counts); a counted event whose
// publication failed (no stream to take it) is published again with the
// next batch, and a per-visitor one is dropped.
func TestPublisherCounted(t *testing.T) {
	t.Parallel()
	nc := embedded(t)
	m, reg := metrics()
	b := make([]byte, 6)
	rand.Read(b)
	prefix := "evtest-" + hex.EncodeToString(b)
	p, err := natsevent.NewPublisher(nc, natsevent.PublisherOptions{Prefix: prefix, Buffer: 2, Metrics: m, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	counted := func(n int64) event.Event {
		return event.New(event.Counted, "room-1", "", time.Now(), event.Data{Arrivals: n})
	}
	if !p.Offer(counted(1)) || !p.Offer(testEvent(1)) {
		t.Fatal("Offer refused with room in the buffer")
	}
	if p.Offer(counted(2)) {
		t.Error("Offer took an event with the buffer full")
	}
	if got := droppedTotal(t, reg, "buffer_full"); got != 0 {
		t.Errorf("dropped (buffer_full) = %v after a refused Offer, want 0", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx) // no stream yet: both fail
	testenv.Eventually(t, 20*time.Second, "the per-visitor event dropped", func() bool { return droppedTotal(t, reg, "failed") == 1 })
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := natsevent.EnsureStream(ctx, js, prefix, 1)
	if err != nil {
		t.Fatal(err)
	}
	p.Emit(counted(3))
	testenv.Eventually(t, 20*time.Second, "both counted events in the stream", func() bool { return count(t, st) == 2 })
	if got := droppedTotal(t, reg, "failed"); got != 1 {
		t.Errorf("dropped (failed) = %v, want the per-visitor event only", got)
	}
}

// TestPublisherNATSDown: with the connection gone, events are dropped and
// counted (nats_down), and Emit still returns at once.
func TestPublisherNATSDown(t *testing.T) {
	t.Parallel()
	nc := embedded(t)
	prefix, _ := stream(t, nc)
	m, reg := metrics()
	p, err := natsevent.NewPublisher(nc, natsevent.PublisherOptions{Prefix: prefix, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	nc.Close()
	for i := range 100 {
		p.Emit(testEvent(i))
	}
	testenv.Eventually(t, 20*time.Second, "100 events dropped", func() bool {
		return droppedTotal(t, reg, "nats_down")+droppedTotal(t, reg, "buffer_full") == 100
	})
	if got := publishedTotal(t, reg, "instance"); got != 0 {
		t.Errorf("published = %v with the connection closed", got)
	}
}

// catalogStore returns a SQLite store, or the PostgreSQL one.
func stores(t *testing.T) map[string]func(testing.TB) booking.Store {
	return map[string]func(testing.TB) booking.Store{
		"sqlite": func(tb testing.TB) booking.Store {
			s, err := sqlitebooking.Open(context.Background(), filepath.Join(tb.TempDir(), "usher.db"))
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { s.Close() })
			return s
		},
		"postgres": func(tb testing.TB) booking.Store {
			s, err := pgbooking.Open(context.Background(), testenv.PostgresSchema(tb), 4)
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { s.Close() })
			return s
		},
	}
}

// wantOnce checks that the stream holds exactly one message per decision,
// of its outcome.
func wantOnce(tb testing.TB, prefix string, st jetstream.Stream, decided []booking.Reservation) {
	tb.Helper()
	seen := map[string]int{}
	for _, m := range messages(tb, st) {
		seen[m.Event.ID]++
		if m.MsgID != m.Event.ID {
			tb.Errorf("event %s with Nats-Msg-Id %q", m.Event.ID, m.MsgID)
		}
		if !strings.HasPrefix(m.Subject, prefix+".events.schedule-") {
			tb.Errorf("event %s on %s", m.Event.ID, m.Subject)
		}
	}
	for _, r := range decided {
		id := r.ID + "." + string(r.Status)
		if seen[id] != 1 {
			tb.Errorf("decision %s: %d messages, want 1", id, seen[id])
		}
	}
	if len(seen) != len(decided) {
		tb.Errorf("%d distinct events in the stream for %d decisions", len(seen), len(decided))
	}
}

func outboxLen(tb testing.TB, s booking.Store) int {
	tb.Helper()
	ev, err := s.Outbox(context.Background(), booking.MaxOutboxBatch)
	if err != nil {
		tb.Fatal(err)
	}
	return len(ev)
}

// TestRelay: the relay publishes every decision's event and empties the
// outbox; events decided while it runs follow.
func TestRelay(t *testing.T) {
	t.Parallel()
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			nc := embedded(t)
			prefix, st := stream(t, nc)
			m, reg := metrics()
			relay, err := natsevent.NewRelay(s, nc, natsevent.RelayOptions{Prefix: prefix, Batch: 5, Every: 10 * time.Millisecond, Metrics: m})
			if err != nil {
				t.Fatal(err)
			}
			decided := eventtest.Sell(t, s, "before", 12) // before Run: a backlog of several batches
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- relay.Run(ctx) }()
			decided = append(decided, eventtest.Sell(t, s, "while", 3)...) // while it runs
			testenv.Eventually(t, 20*time.Second, "the outbox empty", func() bool { return outboxLen(t, s) == 0 })
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run = %v", err)
			}
			wantOnce(t, prefix, st, decided)
			if got := publishedTotal(t, reg, "outbox"); got != float64(len(decided)) {
				t.Errorf("published{source=outbox} = %v, want %d", got, len(decided))
			}
		})
	}
}

// killedStore fails MarkSent, as a relay killed between the stream's
// acknowledgement and the mark would leave things: published, not marked.
type killedStore struct{ booking.Store }

func (killedStore) MarkSent(context.Context, []int64) error { return errors.New("killed") }

// TestRelayKilledBeforeMark: a relay that dies after publishing and
// before marking leaves the events in the outbox; the next relay
// publishes them again and the stream drops every copy (same
// Nats-Msg-Id), so each decision is in the stream once.
func TestRelayKilledBeforeMark(t *testing.T) {
	t.Parallel()
	for name, connect := range map[string]func(testing.TB) *nats.Conn{"embedded": embedded, "external": external} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			nc := connect(t)
			s := stores(t)["sqlite"](t)
			prefix, st := stream(t, nc)
			decided := eventtest.Sell(t, s, "a", 8)
			ctx := context.Background()

			first, err := natsevent.NewRelay(killedStore{s}, nc, natsevent.RelayOptions{Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := first.Round(ctx); err == nil {
				t.Fatal("Round with a failing mark: want an error")
			}
			if got := count(t, st); got != uint64(len(decided)) {
				t.Fatalf("stream holds %d messages after the first relay, want %d", got, len(decided))
			}
			if got := outboxLen(t, s); got != len(decided) {
				t.Fatalf("outbox holds %d after a failed mark, want %d (nothing marked)", got, len(decided))
			}

			second, err := natsevent.NewRelay(s, nc, natsevent.RelayOptions{Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			n, err := second.Round(ctx)
			if err != nil || n != len(decided) {
				t.Fatalf("second relay's Round = %d, %v; want %d, nil", n, err, len(decided))
			}
			if got := second.Duplicates(); got != len(decided) {
				t.Errorf("the stream flagged %d re-publications as duplicates, want %d", got, len(decided))
			}
			if got := outboxLen(t, s); got != 0 {
				t.Errorf("outbox holds %d after the second relay", got)
			}
			wantOnce(t, prefix, st, decided)
		})
	}
}
