package kafkaevent

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"usher/internal/event"
)

var _ event.Offerer = (*Publisher)(nil)

// PublisherOptions tune a Publisher. Zero values take the defaults noted.
type PublisherOptions struct {
	// Prefix is the deployment's name (--nats-name): topic <Prefix>.events.
	// Default "usher".
	Prefix string
	// Buffer is how many events wait for Run at most; Emit drops beyond
	// (Offer refuses). It also bounds the counted events kept for another
	// try after a failed publication. Default 8192.
	Buffer int
	// Batch is the most events produced before their acknowledgements are
	// awaited. Default 256.
	Batch int
	// Timeout bounds the wait for a batch's acknowledgements. Default 5 s.
	Timeout time.Duration
	Metrics *Metrics
	Logger  *slog.Logger
}

// Publisher publishes events best effort, with natsevent.Publisher's
// contract: Emit never blocks, and an event is dropped (counted in
// usher_events_dropped_total, and logged) when the buffer is full or the
// brokers do not acknowledge it in time. Offer refuses a counted event when
// the buffer is full (the queue keeps its counts), and one that failed is
// produced again with the next batch under its ID (at most Buffer of them;
// beyond, and at shutdown, dropped and logged with an error). Emit and
// Offer are safe for concurrent use; Run runs once.
type Publisher struct {
	cl  *kgo.Client
	ch  chan event.Event
	o   PublisherOptions
	m   *Metrics
	log *slog.Logger
	// full counts the events Emit dropped since Run last logged them.
	full atomic.Int64
	// retry holds counted events whose publication failed (Run's
	// goroutine only).
	retry []event.Event
}

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
	return &Publisher{cl: cl, ch: make(chan event.Event, o.Buffer), o: o, m: o.Metrics, log: o.Logger}, nil
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
			for final.Err() == nil {
				batch = p.take(batch[:0])
				if len(batch) == 0 {
					break
				}
				p.publish(final, batch)
			}
			if len(p.retry) > 0 && final.Err() == nil { // one last try
				batch, p.retry = append(batch[:0], p.retry...), nil
				p.publish(final, batch)
			}
			// What failed again, or is still buffered, is lost.
			left := len(p.retry)
			for _, e := range p.take(batch[:0]) {
				if e.Type == event.Counted {
					left++
				} else {
					p.m.droppedN(reasonFailed, 1)
				}
			}
			p.logLost(left)
			p.m.droppedN(reasonFailed, left)
			p.logFull()
			return nil
		case e := <-p.ch:
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

func (p *Publisher) logFull() {
	if n := p.full.Swap(0); n > 0 {
		p.log.Warn("event buffer full: events dropped", "count", n)
	}
}

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

// publish produces batch and waits for its acknowledgements, counting each
// event published or dropped; a counted event that failed is kept for the
// next batch.
func (p *Publisher) publish(ctx context.Context, batch []event.Event) {
	recs := make([]*kgo.Record, 0, len(batch))
	sent := make([]event.Event, 0, len(batch))
	for _, e := range batch {
		r, err := record(p.o.Prefix, e)
		if err != nil {
			p.m.droppedN(reasonInvalid, 1)
			continue
		}
		recs, sent = append(recs, r), append(sent, e)
	}
	acked, err := produce(ctx, p.cl, recs, p.o.Timeout)
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
	if len(lost) > 0 {
		p.log.Debug("produce events", "err", err)
	}
	p.failed(lost)
}

// failed keeps the counted events of evs for another try and drops the
// others.
func (p *Publisher) failed(evs []event.Event) {
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
	p.m.droppedN(reasonFailed, dropped+gaveUp)
	if dropped > 0 {
		p.log.Warn("events not published: dropped", "reason", reasonFailed, "count", dropped)
	}
	p.logLost(gaveUp)
}
