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

var _ event.Offerer = (*Publisher)(nil)

// PublisherOptions tune a Publisher. Zero values take the defaults noted.
type PublisherOptions struct {
	// Prefix is the deployment's name (--nats-name). Default "usher".
	Prefix string
	// Buffer is how many events wait for Run at most; Emit drops beyond
	// (Offer refuses). It also bounds the counted events kept for another
	// try after a failed publication. Default 8192.
	Buffer int
	// Batch is the most events published before their acknowledgements are
	// awaited. Default 256.
	Batch int
	// Timeout bounds the wait for a batch's acknowledgements. Default 5 s.
	Timeout time.Duration
	Metrics *Metrics
	Logger  *slog.Logger
}

// Publisher publishes events best effort: Emit never blocks, and an event
// is dropped (counted in usher_events_dropped_total, and logged) when the
// buffer is full, the connection is down, or the stream does not
// acknowledge it in time. Counted events are not lost that way: Offer
// refuses one when the buffer is full (the queue keeps its counts), and one
// that failed is published again with the next batch under its ID (at most
// Buffer of them; beyond, and at shutdown, dropped and logged with an
// error). Emit and Offer are safe for concurrent use; Run runs once.
type Publisher struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	ch  chan event.Event
	o   PublisherOptions
	m   *Metrics
	log *slog.Logger
	// full counts the events Emit dropped since Run last logged them.
	full atomic.Int64
	// retry holds counted events whose publication failed, published again
	// with the next batch under the same ID (Run's goroutine only).
	retry []event.Event
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

// Emit implements event.Emitter: it never blocks. An event that finds the
// buffer full is dropped, counted (buffer_full) and logged by Run.
func (p *Publisher) Emit(e event.Event) {
	if !p.Offer(e) {
		p.m.droppedN(reasonFull, 1)
		p.full.Add(1)
	}
}

// Offer implements event.Offerer: it never blocks, and reports whether the
// buffer took e.
func (p *Publisher) Offer(e event.Event) bool {
	select {
	case p.ch <- e:
		return true
	default:
		return false
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
					break
				}
				p.publish(final, batch)
			}
			if len(p.retry) > 0 { // one last try
				batch, p.retry = append(batch[:0], p.retry...), nil
				p.publish(final, batch)
			}
			// What failed again is lost.
			p.logLost(len(p.retry))
			p.m.droppedN(reasonFailed, len(p.retry))
			p.logFull()
			return nil
		case e := <-p.ch:
			// The counted events to try again go first (beyond Batch).
			batch, p.retry = append(append(batch[:0], p.retry...), e), p.retry[:0]
			batch = p.take(batch)
			// A batch taken is published to its end (Timeout at most), even
			// if ctx ends meanwhile: an event the stream acknowledged after
			// the cancel must not count as dropped.
			p.publish(context.WithoutCancel(ctx), batch)
			p.logFull()
		}
	}
}

// logFull logs the events Emit dropped since the last call, if any.
func (p *Publisher) logFull() {
	if n := p.full.Swap(0); n > 0 {
		p.log.Warn("event buffer full: events dropped", "count", n)
	}
}

// logLost logs counted events given up for good.
func (p *Publisher) logLost(n int) {
	if n > 0 {
		p.log.Error("counted events not published: their counts are lost", "count", n)
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
// event published or dropped. A counted event that fails is kept for the
// next batch (the same ID: the stream drops it if it had arrived after
// all), up to Buffer of them; beyond, it is dropped and logged.
func (p *Publisher) publish(ctx context.Context, batch []event.Event) {
	if !p.nc.IsConnected() {
		p.failed(batch, reasonDown)
		return
	}
	futures := make([]jetstream.PubAckFuture, 0, len(batch))
	sent := make([]event.Event, 0, len(batch))
	for _, e := range batch {
		f, err := publishAsync(p.js, p.o.Prefix, e)
		switch {
		case errors.Is(err, errInvalid):
			p.m.droppedN(reasonInvalid, 1)
		case err != nil:
			p.failed([]event.Event{e}, reasonFailed)
		default:
			futures, sent = append(futures, f), append(sent, e)
		}
	}
	acked, _ := awaitAcks(ctx, futures, p.o.Timeout)
	var lost []event.Event
	ok := 0
	for i, a := range acked {
		if a {
			ok++
		} else {
			lost = append(lost, sent[i])
		}
	}
	p.m.publishedN(sourceInstance, ok)
	p.failed(lost, reasonFailed)
}

// failed keeps the counted events of evs for another try and drops the
// others, counting them under reason.
func (p *Publisher) failed(evs []event.Event, reason string) {
	dropped, gaveUp := 0, 0
	for _, e := range evs {
		switch {
		case e.Type != event.Counted:
			dropped++
		case len(p.retry) < p.o.Buffer:
			p.retry = append(p.retry, e)
		default:
			gaveUp++
		}
	}
	p.m.droppedN(reason, dropped+gaveUp)
	if dropped > 0 {
		p.log.Warn("events not published: dropped", "reason", reason, "count", dropped)
	}
	p.logLost(gaveUp)
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
