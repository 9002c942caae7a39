package natsevent_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"usher/internal/event"
)

// BenchmarkStreamPersist publishes events to the event stream on the
// embedded server (which fsyncs every write: natsmq.StartEmbedded), in
// windows of 256 asynchronous publications as the Publisher does: with the
// stream as EnsureStream makes it (async persist on one replica) and, for
// reference, the same stream in the default persist mode.
func BenchmarkStreamPersist(b *testing.B) {
	for _, async := range []bool{true, false} {
		name := "persist=default"
		if async {
			name = "persist=async"
		}
		b.Run(name, func(b *testing.B) {
			nc := embedded(b)
			prefix, st := stream(b, nc)
			if !async {
				cfg := st.CachedInfo().Config
				cfg.PersistMode = jetstream.DefaultPersistMode
				js, _ := jetstream.New(nc)
				ctx := context.Background()
				if err := js.DeleteStream(ctx, cfg.Name); err != nil {
					b.Fatal(err)
				}
				if _, err := js.CreateStream(ctx, cfg); err != nil {
					b.Fatal(err)
				}
			}
			js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(512))
			if err != nil {
				b.Fatal(err)
			}
			e := testEvent(1)
			data := []byte(`{"id":"` + e.ID + `","type":"entered","room":"room-1","at":"2026-12-01T20:00:00Z","visitor":"v1","data":{"eta_ms":1001}}`)
			b.ResetTimer()
			for i := range b.N {
				msg := &nats.Msg{Subject: event.Subject(prefix, "room-1", event.Entered), Data: data}
				if _, err := js.PublishMsgAsync(msg, jetstream.WithMsgID(event.NewID())); err != nil {
					b.Fatal(err)
				}
				if i%256 == 255 {
					select {
					case <-js.PublishAsyncComplete():
					case <-time.After(time.Minute):
						b.Fatal("no acknowledgements for a minute")
					}
				}
			}
			<-js.PublishAsyncComplete()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
