package collector_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"usher/internal/analytics"
	"usher/internal/collector"
	"usher/internal/event"
	"usher/internal/event/kafkaevent"
	"usher/internal/testenv"
)

// kafkaCluster starts a kfake cluster with the event topic of prefix and
// returns a function making clients of it with opts.
func kafkaCluster(tb testing.TB, prefix string) func(tb testing.TB, opts ...kgo.Opt) *kgo.Client {
	tb.Helper()
	u, _ := testenv.Kafka(tb)
	brokers, err := kafkaevent.ParseURL(u)
	if err != nil {
		tb.Fatal(err)
	}
	connect := func(tb testing.TB, opts ...kgo.Opt) *kgo.Client {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cl, err := kafkaevent.Connect(ctx, brokers, "usher collector test", opts...)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(cl.Close)
		return cl
	}
	if err := kafkaevent.EnsureTopic(context.Background(), connect(tb), prefix); err != nil {
		tb.Fatal(err)
	}
	return connect
}

// produce writes evs to the topic keyed by room, as kafkaevent does, and
// waits for every acknowledgement.
func produce(tb testing.TB, cl *kgo.Client, prefix string, evs []event.Event) {
	tb.Helper()
	recs := make([]*kgo.Record, len(evs))
	for i, e := range evs {
		body, _ := json.Marshal(e)
		recs[i] = &kgo.Record{Topic: event.Topic(prefix), Key: []byte(e.Room), Value: body}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		tb.Fatalf("produce: %v", err)
	}
}

func kafkaOptions(prefix string, reg prometheus.Registerer, log *slog.Logger) collector.Options {
	return collector.Options{Prefix: prefix, Batch: 64, FetchWait: 100 * time.Millisecond, RetryAfter: 50 * time.Millisecond, Registerer: reg, Logger: log}
}

// startKafka runs a collector on its own client of the group.
func startKafka(tb testing.TB, cl *kgo.Client, a *analytics.Analytics, prefix string) *running {
	tb.Helper()
	reg := prometheus.NewRegistry()
	c, err := collector.NewKafka(cl, a, kafkaOptions(prefix, reg, nil))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1), reg: reg}
	go func() { r.done <- c.Run(ctx) }()
	tb.Cleanup(func() { cancel(); <-r.done })
	return r
}

// caughtUp reports whether the group committed every partition's end.
func caughtUp(tb testing.TB, cl *kgo.Client, prefix string) bool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, event.Topic(prefix))
	if err != nil || ends.Error() != nil {
		return false
	}
	committed, err := adm.FetchOffsets(ctx, prefix+".collector")
	if err != nil || committed.Error() != nil {
		return false
	}
	ok := true
	ends.Each(func(o kadm.ListedOffset) {
		c, found := committed.Lookup(o.Topic, o.Partition)
		if o.Offset > 0 && (!found || c.At != o.Offset) {
			ok = false
		}
	})
	return ok
}

// TestKafkaKillRestart is testKillRestart on Kafka: collectors stopped
// while events flow (one cancelled, one whose client is closed), a batch
// counted by a member of the group that never committed, events
// re-published and a malformed record; after a restart every event is
// counted exactly once and the group has committed the whole topic.
func TestKafkaKillRestart(t *testing.T) {
	t.Parallel()
	p := prefix()
	connect := kafkaCluster(t, p)
	pub := connect(t)
	a := analytics.New(sqliteStore(t), analytics.Options{})
	evs, want := workload(3, 150)
	third := len(evs) / 3
	group := collector.KafkaOpts(collector.Options{Prefix: p})

	// 1. A collector counts some of the first third, and is cancelled.
	cl1 := connect(t, group...)
	first := startKafka(t, cl1, a, p)
	produce(t, pub, p, evs[:third])
	testenv.Eventually(t, 30*time.Second, "the first collector to count some events", func() bool { return total(counted(t, a, want)) > 0 })
	first.cancel()
	if err := first.wait(t); err != nil {
		t.Fatalf("cancelled collector: Run = %v, want nil", err)
	}
	cl1.Close() // leaves the group, as usher collect does when it stops

	// 2. A member of the group polls a batch and counts it, and closes
	// without committing: a collector that died between its transaction
	// and its commit. The group's next member reads the batch again.
	tail := third + 20
	produce(t, pub, p, evs[third:tail])
	dead := connect(t, group...)
	var unacked []event.Event
	pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	for len(unacked) == 0 && pctx.Err() == nil {
		for _, r := range dead.PollRecords(pctx, 20).Records() {
			var e event.Event
			if err := json.Unmarshal(r.Value, &e); err != nil {
				t.Fatal(err)
			}
			unacked = append(unacked, e)
		}
	}
	cancel()
	if len(unacked) == 0 {
		t.Fatal("polled nothing of the events not yet committed")
	}
	if res, err := a.Apply(context.Background(), unacked); err != nil || res.Applied+res.Duplicate != len(unacked) {
		t.Fatalf("apply the uncommitted batch: %+v, %v", res, err)
	}
	dead.AllowRebalance()
	dead.Close()

	// 3. A second collector whose client is closed under it returns an
	// error.
	cl2 := connect(t, group...)
	second := startKafka(t, cl2, a, p)
	produce(t, pub, p, evs[tail:2*third])
	before := total(counted(t, a, want))
	testenv.Eventually(t, 30*time.Second, "the second collector to count more", func() bool { return total(counted(t, a, want)) > before })
	cl2.Close()
	if err := second.wait(t); err == nil || !strings.Contains(err.Error(), "client closed") {
		t.Errorf("collector whose client closed: Run = %v, want a client closed error", err)
	}

	// 4. The rest, a malformed record, and duplicates: Kafka keeps them.
	produce(t, pub, p, evs[2*third:])
	if err := pub.ProduceSync(context.Background(), &kgo.Record{Topic: event.Topic(p), Key: []byte("room-0"), Value: []byte("not json")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dups := evs[:40]
	produce(t, pub, p, dups)

	// 5. A third collector takes it to the end.
	third3 := startKafka(t, connect(t, group...), a, p)
	testenv.Eventually(t, 60*time.Second, "the group to commit the whole topic", func() bool { return caughtUp(t, pub, p) })
	if diff := cmp.Diff(want, counted(t, a, want)); diff != "" {
		t.Errorf("analytics differ from the published truth (-want +got):\n%s", diff)
	}
	if got := third3.events("duplicate") + second.events("duplicate"); got < float64(len(dups)+len(unacked)) {
		t.Errorf("the collectors saw %v duplicates, want at least %d (re-published) + %d (read again)", got, len(dups), len(unacked))
	}
	if got := third3.events("malformed"); got != 1 {
		t.Errorf("malformed = %v, want 1", got)
	}
}

// TestKafkaDatabaseDown: a batch whose transaction fails is neither
// committed nor lost: it is counted once the database answers.
func TestKafkaDatabaseDown(t *testing.T) {
	t.Parallel()
	p := prefix()
	connect := kafkaCluster(t, p)
	store := &failing{Store: sqliteStore(t)}
	store.fail.Store(true)
	a := analytics.New(store, analytics.Options{})
	evs, want := workload(1, 30)
	produce(t, connect(t), p, evs)
	r := startKafka(t, connect(t, collector.KafkaOpts(collector.Options{Prefix: p})...), a, p)
	testenv.Eventually(t, 30*time.Second, "a failed transaction", func() bool { return store.failed.Load() > 0 })
	if caughtUp(t, connect(t), p) {
		t.Fatal("the group committed a batch whose transaction failed")
	}
	store.fail.Store(false)
	testenv.Eventually(t, 30*time.Second, "every event counted and committed", func() bool {
		return cmp.Equal(want, counted(t, a, want)) && caughtUp(t, connect(t), p)
	})
	if got := r.events("applied"); got != float64(len(evs)) {
		t.Errorf("applied = %v, want %d", got, len(evs))
	}
}

// failing is a store whose transactions fail while fail is set.
type failing struct {
	analytics.Store
	fail   atomic.Bool
	failed atomic.Int64
}

func (f *failing) Update(ctx context.Context, fn func(context.Context, analytics.Tx) error) error {
	if f.fail.Load() {
		f.failed.Add(1)
		return fmt.Errorf("failing: %w", analytics.ErrUnavailable)
	}
	return f.Store.Update(ctx, fn)
}
