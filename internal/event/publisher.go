package event

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// Sink is a transport's side of a Publisher (natsevent's, kafkaevent's):
// it only sends.
type Sink interface {
	// Send publishes batch and waits, for at most timeout or until ctx
	// ends, for the transport's acknowledgements. It returns, per event,
	// "" when the transport took it, else why not: ReasonInvalid (no
	// transport ever will), or a reason of the transport's own (a metrics
	// label such as "failed").
	Send(ctx context.Context, batch []Event, timeout time.Duration) []string
}

// Counter receives a Publisher's counts: a transport's metrics.
type Counter interface {
	Published(n int)
	Dropped(reason string, n int)
}

// Reasons for a dropped event every transport shares (label reason).
const (
	ReasonFull    = "buffer_full" // Emit found the buffer full
	ReasonInvalid = "invalid"     // no subject or topic can carry it
	ReasonFailed  = "failed"      // refused or not acknowledged in time
)

// PublisherOptions tune a Publisher. Zero values take the defaults noted.
type PublisherOptions struct {
	// Buffer is how many events wait for Run at most; Emit drops beyond
	// (Offer refuses). It also bounds the counted events kept for another
	// try after a failed publication. Default 8192.
	Buffer int
	// Batch is the most events sent before their acknowledgements are
	// awaited. Default 256.
	Batch int
	// Timeout bounds the wait for a batch's acknowledgements. Default 5 s.
	Timeout time.Duration
	// Counter receives the counts; nil: none.
	Counter Counter
	Logger  *slog.Logger
}

var _ Offerer = (*Publisher)(nil)

// Publisher publishes events best effort through a Sink: Emit never
// blocks, and an event is dropped (counted, and logged) when the buffer is
// full or the transport does not take it. Counted events are not lost that
// way: Offer refuses one when the buffer is full (the queue keeps its
// counts), and one that failed is sent again with the next batch under its
// ID (at most Buffer of them; beyond, and at shutdown, dropped and logged
// with an error). Emit and Offer are safe for concurrent use; Run runs
// once.
type Publisher struct {
	sink Sink
	ch   chan Event
	o    PublisherOptions
	log  *slog.Logger
	// full counts the events Emit dropped since Run last logged them.
	full atomic.Int64
	// retry holds counted events whose publication failed, sent again with
	// the next batch under the same ID (Run's goroutine only).
	retry []Event
}

// NewPublisher returns a Publisher on sink. It starts nothing; events
// emitted before Run starts wait in the buffer.
func NewPublisher(sink Sink, o PublisherOptions) *Publisher {
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
	return &Publisher{sink: sink, ch: make(chan Event, o.Buffer), o: o, log: o.Logger}
}

// Emit implements Emitter: it never blocks. An event that finds the buffer
// full is dropped, counted (buffer_full) and logged by Run.
func (p *Publisher) Emit(e Event) {
	if !p.Offer(e) {
		p.dropped(ReasonFull, 1)
		p.full.Add(1)
	}
}

// Offer implements Offerer: it never blocks, and reports whether the
// buffer took e.
func (p *Publisher) Offer(e Event) bool {
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
	batch := make([]Event, 0, p.o.Batch)
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
				if e.Type == Counted {
					left++
				} else {
					p.dropped(ReasonFailed, 1)
				}
			}
			p.logLost(left)
			p.dropped(ReasonFailed, left)
			p.logFull()
			return nil
		case e := <-p.ch:
			// The counted events to try again go first (beyond Batch).
			batch, p.retry = append(append(batch[:0], p.retry...), e), p.retry[:0]
			batch = p.take(batch)
			// A batch taken is published to its end (Timeout at most), even
			// if ctx ends meanwhile: an event the transport acknowledged
			// after the cancel must not count as dropped.
			p.publish(context.WithoutCancel(ctx), batch)
			p.logFull()
		}
	}
}

func (p *Publisher) dropped(reason string, n int) {
	if p.o.Counter != nil && n > 0 {
		p.o.Counter.Dropped(reason, n)
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
func (p *Publisher) take(batch []Event) []Event {
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

// publish sends batch, counting each event published or dropped. A
// counted event that failed (other than invalid) is kept for the next
// batch, up to Buffer of them; beyond, it is dropped and logged.
func (p *Publisher) publish(ctx context.Context, batch []Event) {
	reasons := p.sink.Send(ctx, batch, p.o.Timeout)
	ok := 0
	dropped, lost := map[string]int{}, map[string]int{}
	for i, e := range batch {
		switch r := reasons[i]; {
		case r == "":
			ok++
		case r == ReasonInvalid || e.Type != Counted:
			dropped[r]++
		case len(p.retry) < p.o.Buffer:
			p.retry = append(p.retry, e)
		default:
			lost[r]++
		}
	}
	if p.o.Counter != nil && ok > 0 {
		p.o.Counter.Published(ok)
	}
	for r, n := range dropped {
		p.dropped(r, n)
		if r != ReasonInvalid {
			p.log.Warn("events not published: dropped", "reason", r, "count", n)
		}
	}
	for r, n := range lost {
		p.dropped(r, n)
		p.logLost(n)
	}
}
