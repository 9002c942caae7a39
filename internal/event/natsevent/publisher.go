package natsevent

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"usher/internal/event"
)

// PublisherOptions tune a Publisher. Zero values take the defaults noted.
type PublisherOptions struct {
	// Prefix is the deployment's name (--nats-name). Default "usher".
	Prefix string
	// Buffer, Batch and Timeout are event.PublisherOptions'.
	Buffer  int
	Batch   int
	Timeout time.Duration
	Metrics *Metrics
	Logger  *slog.Logger
}

// Publisher is event.Publisher on the event stream: an event it cannot
// publish (the buffer full, the connection down, no acknowledgement in
// time) is dropped, counted in usher_events_dropped_total and logged;
// counted events are kept and tried again.
type Publisher = event.Publisher

// NewPublisher returns a Publisher on nc. It starts nothing; the stream is
// EnsureStream's. Events emitted before Run starts wait in the buffer.
func NewPublisher(nc *nats.Conn, o PublisherOptions) (*Publisher, error) {
	if o.Prefix == "" {
		o.Prefix = "usher"
	}
	if o.Batch <= 0 {
		o.Batch = 256
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*o.Batch))
	if err != nil {
		return nil, err
	}
	return event.NewPublisher(&sink{nc: nc, js: js, prefix: o.Prefix}, event.PublisherOptions{
		Buffer: o.Buffer, Batch: o.Batch, Timeout: o.Timeout, Counter: o.Metrics.Instance(), Logger: o.Logger,
	}), nil
}

// sink is the Publisher's side of the stream.
type sink struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	prefix string
	// duplicates counts acknowledgements the stream flagged as
	// duplicates (copies it dropped).
	duplicates atomic.Int64
}

// Send implements event.Sink: asynchronous publications, then their
// acknowledgements.
func (s *sink) Send(ctx context.Context, batch []event.Event, timeout time.Duration) []string {
	reasons := make([]string, len(batch))
	if !s.nc.IsConnected() {
		for i := range reasons {
			reasons[i] = reasonDown
		}
		return reasons
	}
	futures := make([]jetstream.PubAckFuture, 0, len(batch))
	sent := make([]int, 0, len(batch))
	for i, e := range batch {
		f, err := publishAsync(s.js, s.prefix, e)
		switch {
		case errors.Is(err, errInvalid):
			reasons[i] = reasonInvalid
		case err != nil:
			reasons[i] = reasonFailed
		default:
			futures, sent = append(futures, f), append(sent, i)
		}
	}
	acked, dups := awaitAcks(ctx, futures, timeout)
	s.duplicates.Add(int64(dups))
	for j, a := range acked {
		if !a {
			reasons[sent[j]] = reasonFailed
		}
	}
	return reasons
}

// publishAsync publishes e with its ID as Nats-Msg-Id.
func publishAsync(js jetstream.JetStream, prefix string, e event.Event) (jetstream.PubAckFuture, error) {
	subject, data, err := message(prefix, e)
	if err != nil {
		return nil, err
	}
	return js.PublishMsgAsync(&nats.Msg{Subject: subject, Data: data}, jetstream.WithMsgID(e.ID))
}

// awaitAcks waits for the futures' acknowledgements, for at most timeout
// in all (or until ctx ends): acked tells, per future, whether the stream
// acknowledged it (a duplicate it dropped included); duplicates counts
// those.
func awaitAcks(ctx context.Context, futures []jetstream.PubAckFuture, timeout time.Duration) (acked []bool, duplicates int) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	acked = make([]bool, len(futures))
	late := false
	for i, f := range futures {
		var ack *jetstream.PubAck
		if late { // what has arrived still counts
			select {
			case ack = <-f.Ok():
			default:
			}
		} else {
			select {
			case ack = <-f.Ok():
			case <-f.Err():
			case <-timer.C:
				late = true
			case <-ctx.Done():
				late = true
			}
		}
		if ack != nil {
			acked[i] = true
			if ack.Duplicate {
				duplicates++
			}
		}
	}
	return acked, duplicates
}

func count(acked []bool) (ok, failed int) {
	for _, a := range acked {
		if a {
			ok++
		} else {
			failed++
		}
	}
	return ok, failed
}
