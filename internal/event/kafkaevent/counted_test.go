package kafkaevent_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"usher/internal/event"
	"usher/internal/event/eventtest"
	"usher/internal/event/kafkaevent"
	"usher/internal/testenv"
)

// TestPublisherCounted: while the brokers refuse every record, a counted
// event is kept and produced again with the next batch (under its ID),
// and a per-visitor one is dropped and counted as failed.
func TestPublisherCounted(t *testing.T) {
	t.Parallel()
	u, c := testenv.Kafka(t)
	brokers, err := kafkaevent.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cl, err := kafkaevent.Connect(ctx, brokers, "usher kafkaevent test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	prefix := topic(t, cl)

	var refuse atomic.Bool
	var refused atomic.Int64
	refuse.Store(true)
	c.ControlKey(kmsg.Produce.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !refuse.Load() {
			return nil, nil, false
		}
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.InvalidRecord.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		refused.Add(1)
		return resp, nil, true
	})

	reg := prometheus.NewPedanticRegistry()
	p, err := kafkaevent.NewPublisher(cl, kafkaevent.PublisherOptions{Prefix: prefix, Metrics: kafkaevent.NewMetrics(reg), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	counted := event.New(event.Counted, "room-1", "", time.Now(), event.Data{Arrivals: 5})
	p.Emit(counted)
	p.Emit(eventtest.Event(1))
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	testenv.Eventually(t, 30*time.Second, "the per-visitor event dropped", func() bool {
		return eventtest.Counter(t, reg, "usher_events_dropped_total", "reason", "failed") == 1
	})
	if refused.Load() == 0 {
		t.Fatal("no produce request refused")
	}
	refuse.Store(false)
	next := event.New(event.Counted, "room-1", "", time.Now(), event.Data{Arrivals: 7})
	p.Emit(next)
	testenv.Eventually(t, 30*time.Second, "both counted events published", func() bool {
		return eventtest.Counter(t, reg, "usher_events_published_total", "source", "instance") == 2
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	ids := map[string]int{}
	for _, r := range records(t, brokers, prefix) {
		ids[r.Event.ID]++
	}
	if ids[counted.ID] != 1 || ids[next.ID] != 1 || len(ids) != 2 {
		t.Errorf("topic holds %v, want %s and %s once each", ids, counted.ID, next.ID)
	}
	if got := eventtest.Counter(t, reg, "usher_events_dropped_total", "reason", "failed"); got != 1 {
		t.Errorf("dropped (failed) = %v, want the per-visitor event only", got)
	}
}
