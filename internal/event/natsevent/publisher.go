package natsevent

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"usher/internal/event"
)

var _ event.Emitter = (*Publisher)(nil)

// PublisherOptions tune a Publisher. Zero values take the defaults noted.
type PublisherOptions struct {
	// Prefix is the deployment's name (--nats-name). Default "usher".
	Prefix string
	// Buffer is how many events wait for Run at most; Emit drops beyond.
	// Default 8192: a few seconds of a busy sale's opening.
	Buffer int
	// Batch is the most events published before their acknowledgements are
	// awaited. Default 256.
	Batch int
	// Timeout bounds the wait for a batch's acknowledgements. Default 5 s.
	Timeout time.Duration
	Metrics *Metrics
	Logger  *slog.Logger
}

// Publisher publishes best-effort events (see the package comment). Emit
// is safe for concurrent use; Run runs once.
type Publisher struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	ch  chan event.Event
	o   PublisherOptions
	m   *Metrics
	log *slog.Logger
}

// NewPublisher returns a Publisher on nc. It starts nothing; the stream is
// EnsureStream's. Events emitted before Run starts wait in the buffer.
func NewPublisher(nc *nats.Conn, o PublisherOptions) (*Publisher, error) {
	if o.Prefix == "" {
		o.Prefix = "usher"
	}
	if o.Buffer <= 0 {
		o.Buffer = 8192
	}
	if o.Batch <= 0 {
		o.Batch = 256
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*o.Batch))
	if err != nil {
		return nil, err
	}
	return &Publisher{nc: nc, js: js, ch: make(chan event.Event, o.Buffer), o: o, m: o.Metrics, log: o.Logger}, nil
}

// Emit implements event.Emitter: it never blocks.
func (p *Publisher) Emit(e event.Event) {
	select {
	case p.ch <- e:
	default:
		p.m.droppedN(reasonFull, 1)
	}
}

// Run publishes emitted events until ctx ends, then publishes what the
// buffer still holds (for at most Timeout) and returns nil.
func (p *Publisher) Run(ctx context.Context) error {
	batch := make([]event.Event, 0, p.o.Batch)
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.Background(), p.o.Timeout)
			defer cancel()
			for {
				batch = p.take(batch[:0])
				if len(batch) == 0 {
					return nil
				}
				p.publish(final, batch)
			}
		case e := <-p.ch:
			batch = p.take(append(batch[:0], e))
			p.publish(ctx, batch)
		}
	}
}

// take adds waiting events to batch, up to Batch, without blocking.
func (p *Publisher) take(batch []event.Event) []event.Event {
	for len(batch) < p.o.Batch {
		select {
		case e := <-p.ch:
			batch = append(batch, e)
		default:
			return batch
		}
	}
	return batch
}

// publish sends batch and waits for its acknowledgements, counting each
// event published or dropped.
func (p *Publisher) publish(ctx context.Context, batch []event.Event) {
	if !p.nc.IsConnected() {
		p.m.droppedN(reasonDown, len(batch))
		return
	}
	futures := make([]jetstream.PubAckFuture, 0, len(batch))
	for _, e := range batch {
		f, err := publishAsync(p.js, p.o.Prefix, e)
		switch {
		case errors.Is(err, errInvalid):
			p.m.droppedN(reasonInvalid, 1)
		case err != nil:
			p.m.droppedN(reasonFailed, 1)
		default:
			futures = append(futures, f)
		}
	}
	acked, _ := awaitAcks(ctx, futures, p.o.Timeout)
	ok, failed := count(acked)
	p.m.publishedN(sourceInstance, ok)
	if failed > 0 {
		p.m.droppedN(reasonFailed, failed)
		p.log.Warn("events not acknowledged by the stream: dropped", "count", failed)
	}
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
