package kafkaevent_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"usher/internal/booking"
	"usher/internal/booking/sqlitebooking"
	"usher/internal/event"
	"usher/internal/event/eventtest"
	"usher/internal/event/kafkaevent"
	"usher/internal/testenv"
)

// cluster starts a kfake cluster of the test's own and returns its
// brokers and a client of it.
func cluster(tb testing.TB) ([]string, *kgo.Client) {
	tb.Helper()
	u, _ := testenv.Kafka(tb)
	brokers, err := kafkaevent.ParseURL(u)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kafkaevent.Connect(ctx, brokers, "usher kafkaevent test")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cl.Close)
	return brokers, cl
}

// topic creates the event topic under a prefix of the test's own.
func topic(tb testing.TB, cl *kgo.Client) string {
	tb.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	prefix := "evtest-" + hex.EncodeToString(b)
	if err := kafkaevent.EnsureTopic(context.Background(), cl, prefix); err != nil {
		tb.Fatalf("EnsureTopic: %v", err)
	}
	return prefix
}

// received is one record of the topic.
type received struct {
	Key   string
	Event event.Event
}

func records(tb testing.TB, brokers []string, prefix string) []received {
	tb.Helper()
	var out []received
	for _, r := range testenv.ReadTopic(tb, brokers, event.Topic(prefix)) {
		var e event.Event
		if err := json.Unmarshal(r.Value, &e); err != nil {
			tb.Fatalf("record %d/%d: %v: %s", r.Partition, r.Offset, err, r.Value)
		}
		out = append(out, received{string(r.Key), e})
	}
	return out
}

func TestConformance(t *testing.T) {
	t.Parallel()
	eventtest.Run(t, backend)
}

// BenchmarkPublisher is eventtest.Bench on kfake, an in-process cluster
// that keeps records in memory: compare with natsevent's, as a ratio.
func BenchmarkPublisher(b *testing.B) { eventtest.Bench(b, backend) }

// backend is a topic of the test's own on a kfake cluster of its own.
func backend(tb testing.TB) eventtest.Backend {
	brokers, cl := cluster(tb)
	prefix := topic(tb, cl)
	return eventtest.Backend{
		NewPublisher: func(tb testing.TB, buffer int, reg prometheus.Registerer) eventtest.Publisher {
			p, err := kafkaevent.NewPublisher(cl, kafkaevent.PublisherOptions{Prefix: prefix, Buffer: buffer, Metrics: kafkaevent.NewMetrics(reg)})
			if err != nil {
				tb.Fatal(err)
			}
			return p
		},
		Published: func(tb testing.TB) []event.Event {
			var out []event.Event
			for _, r := range records(tb, brokers, prefix) {
				if r.Key != r.Event.Room {
					tb.Errorf("event %s of room %s keyed %q", r.Event.ID, r.Event.Room, r.Key)
				}
				out = append(out, r.Event)
			}
			return out
		},
	}
}

// TestEnsureTopic: the topic is made once with its settings; again, it is
// left as it is.
func TestEnsureTopic(t *testing.T) {
	t.Parallel()
	_, cl := cluster(t)
	prefix := topic(t, cl)
	if err := kafkaevent.EnsureTopic(context.Background(), cl, prefix); err != nil {
		t.Fatalf("EnsureTopic again: %v", err)
	}
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	td, err := adm.ListTopics(ctx, event.Topic(prefix))
	if err != nil || td.Error() != nil {
		t.Fatalf("ListTopics: %v %v", err, td.Error())
	}
	if got := len(td[event.Topic(prefix)].Partitions); got != kafkaevent.Partitions {
		t.Errorf("%d partitions, want %d", got, kafkaevent.Partitions)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, event.Topic(prefix))
	if err != nil {
		t.Fatal(err)
	}
	c, err := rc.On(event.Topic(prefix), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(kafkaevent.Retention.Milliseconds())
	found := false
	for _, kv := range c.Configs {
		if kv.Key == "retention.ms" {
			found = true
			if kv.MaybeValue() != want {
				t.Errorf("retention.ms = %q, want %q", kv.MaybeValue(), want)
			}
		}
	}
	if !found {
		t.Error("no retention.ms on the topic")
	}
}

// TestBrokerDown: with no broker listening, Connect fails with an error
// that names the brokers, once ctx ends.
func TestBrokerDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cl, err := kafkaevent.Connect(ctx, []string{addr}, "usher kafkaevent test")
	if err == nil {
		cl.Close()
		t.Fatal("Connect to a closed port: want an error")
	}
	if !strings.Contains(err.Error(), addr) {
		t.Errorf("Connect = %v, want the broker's address in it", err)
	}
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"kafka://k1:9092", []string{"k1:9092"}},
		{"kafka://k1,k2:9093", []string{"k1:9092", "k2:9093"}},
		{"kafka://127.0.0.1:1234/", []string{"127.0.0.1:1234"}},
		{"kafka://", nil},
		{"nats://k1:4222", nil},
		{"kafka://user@k1:9092", nil},
		{"kafka://k1:9092,", nil},
	} {
		got, err := kafkaevent.ParseURL(tc.in)
		if (err != nil) != (tc.want == nil) || !cmp.Equal(got, tc.want) {
			t.Errorf("ParseURL(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
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

// killedStore fails MarkSent: a relay killed between the brokers'
// acknowledgement and the mark.
type killedStore struct{ booking.Store }

func (killedStore) MarkSent(context.Context, []int64) error { return errors.New("killed") }

// TestRelay: a relay that dies after producing and before marking leaves
// the events in the outbox; the next one produces them again (Kafka keeps
// both copies, under one ID each) and empties it. Every decision is in the
// topic, keyed by its room, twice, and the collector's de-duplication on
// the ID is what makes it once.
func TestRelay(t *testing.T) {
	t.Parallel()
	brokers, cl := cluster(t)
	prefix := topic(t, cl)
	s, err := sqlitebooking.Open(context.Background(), filepath.Join(t.TempDir(), "usher.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	decided := eventtest.Sell(t, s, "k", 8)
	ctx := context.Background()
	reg := prometheus.NewPedanticRegistry()
	m := kafkaevent.NewMetrics(reg)

	first, err := kafkaevent.NewRelay(killedStore{s}, cl, kafkaevent.RelayOptions{Prefix: prefix, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Round(ctx); err == nil {
		t.Fatal("Round with a failing mark: want an error")
	}
	if got := len(records(t, brokers, prefix)); got != len(decided) {
		t.Fatalf("topic holds %d records after the first relay, want %d", got, len(decided))
	}
	if got := outboxLen(t, s); got != len(decided) {
		t.Fatalf("outbox holds %d after a failed mark, want %d", got, len(decided))
	}

	second, err := kafkaevent.NewRelay(s, cl, kafkaevent.RelayOptions{Prefix: prefix, Metrics: m, Every: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- second.Run(rctx) }()
	testenv.Eventually(t, 30*time.Second, "the outbox empty", func() bool { return outboxLen(t, s) == 0 })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	seen := map[string]int{}
	for _, r := range records(t, brokers, prefix) {
		seen[r.Event.ID]++
		if r.Key != r.Event.Room || !strings.HasPrefix(r.Key, "schedule-") {
			t.Errorf("event %s of room %s keyed %q", r.Event.ID, r.Event.Room, r.Key)
		}
	}
	for _, d := range decided {
		if id := d.ID + "." + string(d.Status); seen[id] != 2 {
			t.Errorf("decision %s: %d records, want 2 (published, then again after the lost mark)", id, seen[id])
		}
	}
	if len(seen) != len(decided) {
		t.Errorf("%d distinct events for %d decisions", len(seen), len(decided))
	}
	if got := eventtest.Counter(t, reg, "usher_events_published_total", "source", "outbox"); got != float64(2*len(decided)) {
		t.Errorf("published{source=outbox} = %v, want %d", got, 2*len(decided))
	}
}
