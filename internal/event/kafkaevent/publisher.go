package kafkaevent

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"usher/internal/event"
)

// PublisherOptions tune a Publisher. Zero values take the defaults noted.
type PublisherOptions struct {
	// Prefix is the deployment's name (--nats-name): topic <Prefix>.events.
	// Default "usher".
	Prefix string
	// Buffer, Batch and Timeout are event.PublisherOptions'.
	Buffer  int
	Batch   int
	Timeout time.Duration
	Metrics *Metrics
	Logger  *slog.Logger
}

// Publisher is event.Publisher on the event topic, with natsevent's
// contract: an event the brokers do not acknowledge in time, or that
// finds the buffer full, is dropped, counted and logged; counted events
// are kept and produced again under their IDs.
type Publisher = event.Publisher

// NewPublisher returns a Publisher on cl (which it does not own). It
// starts nothing; the topic is EnsureTopic's. Events emitted before Run
// starts wait in the buffer.
func NewPublisher(cl *kgo.Client, o PublisherOptions) (*Publisher, error) {
	if cl == nil {
		return nil, errors.New("kafkaevent: publisher: want a client")
	}
	if o.Prefix == "" {
		o.Prefix = "usher"
	}
	return event.NewPublisher(&sink{cl: cl, prefix: o.Prefix}, event.PublisherOptions{
		Buffer: o.Buffer, Batch: o.Batch, Timeout: o.Timeout, Counter: o.Metrics.Instance(), Logger: o.Logger,
	}), nil
}

// sink is the Publisher's side of the topic.
type sink struct {
	cl     *kgo.Client
	prefix string
}

// Send implements event.Sink.
func (s *sink) Send(ctx context.Context, batch []event.Event, timeout time.Duration) []string {
	reasons := make([]string, len(batch))
	recs := make([]*kgo.Record, 0, len(batch))
	sent := make([]int, 0, len(batch))
	for i, e := range batch {
		r, err := record(s.prefix, e)
		if err != nil {
			reasons[i] = reasonInvalid
			continue
		}
		recs, sent = append(recs, r), append(sent, i)
	}
	acked, _ := produce(ctx, s.cl, recs, timeout)
	for j, a := range acked {
		if !a {
			reasons[sent[j]] = reasonFailed
		}
	}
	return reasons
}
