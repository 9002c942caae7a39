package event

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// OutboxEvent is an event in a database's outbox (booking.OutboxEvent):
// Seq orders the outbox, in the order of the writes.
type OutboxEvent struct {
	Seq int64
	Event
}

// Outbox is the part of booking.Store a Relay reads.
type Outbox interface {
	Outbox(ctx context.Context, limit int) ([]OutboxEvent, error)
	MarkSent(ctx context.Context, seqs []int64) error
}

// RelayOptions tune a Relay. Zero values take the defaults noted.
type RelayOptions struct {
	// Batch is the most events read and sent per round. Default 256.
	Batch int
	// Every is the wait after a round that found the outbox empty (or
	// short of a batch): how late a decision's event may be. Default
	// 250 ms.
	Every time.Duration
	// RetryAfter is the wait after a failed round. Default 1 s.
	RetryAfter time.Duration
	// Timeout bounds each database call and each batch's
	// acknowledgements. Default 5 s.
	Timeout time.Duration
	// Counter counts the events the transport took and those dropped as
	// invalid; Failed is called after each failed round. Either may be nil.
	Counter Counter
	Failed  func()
	Logger  *slog.Logger
}

// Relay sends the outbox through a Sink at least once: it marks outbox
// events sent only after the transport took them, so a relay that dies in
// between sends them again, and consumers drop the copies by their IDs.
// An event no transport can carry (ReasonInvalid) is logged and marked
// sent. Run (or Round) runs on one goroutine at a time; several relays on
// one database (one per instance) send the same events.
type Relay struct {
	out  Outbox
	sink Sink
	o    RelayOptions
	log  *slog.Logger
	// sent holds events taken but not yet marked: the next round marks
	// them before it reads, so that a failed mark does not send them again
	// while the relay runs.
	sent []int64
}

// NewRelay returns a relay from out through sink. It starts nothing.
func NewRelay(out Outbox, sink Sink, o RelayOptions) *Relay {
	if o.Batch <= 0 {
		o.Batch = 256
	}
	if o.Every <= 0 {
		o.Every = 250 * time.Millisecond
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Relay{out: out, sink: sink, o: o, log: o.Logger}
}

// Run relays until ctx ends, and returns nil then. Failed rounds are
// logged, counted and retried; the outbox keeps their events.
func (r *Relay) Run(ctx context.Context) error {
	for {
		n, err := r.Round(ctx)
		wait := r.o.Every
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			if r.o.Failed != nil {
				r.o.Failed()
			}
			r.log.Warn("relay the outbox", "err", err)
			wait = r.o.RetryAfter
		case n == r.o.Batch:
			continue // more waiting
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Round marks what the last round could not, then reads up to Batch
// events, sends them, and marks those the transport took. It returns how
// many it read. Events not taken stay in the outbox for the next round.
func (r *Relay) Round(ctx context.Context) (int, error) {
	if err := r.mark(ctx); err != nil {
		return 0, err
	}
	rctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	events, err := r.out.Outbox(rctx, r.o.Batch)
	cancel()
	if err != nil || len(events) == 0 {
		return 0, err
	}
	batch := make([]Event, len(events))
	for i, e := range events {
		batch[i] = e.Event
	}
	ok, notTaken, why := 0, 0, ""
	for i, reason := range r.sink.Send(ctx, batch, r.o.Timeout) {
		e := events[i]
		switch reason {
		case "":
			ok++
			r.sent = append(r.sent, e.Seq)
		case ReasonInvalid: // sending it again never will
			r.log.Error("outbox event without a valid ID, room or type: dropped", "seq", e.Seq, "id", e.ID, "room", e.Room, "type", e.Type)
			if r.o.Counter != nil {
				r.o.Counter.Dropped(ReasonInvalid, 1)
			}
			r.sent = append(r.sent, e.Seq)
		default:
			notTaken, why = notTaken+1, reason
		}
	}
	if r.o.Counter != nil && ok > 0 {
		r.o.Counter.Published(ok)
	}
	if err := r.mark(ctx); err != nil {
		return len(events), err
	}
	if notTaken > 0 {
		return len(events), fmt.Errorf("relay: %d of %d events not taken (%s)", notTaken, len(events), why)
	}
	return len(events), nil
}

// mark marks r.sent sent.
func (r *Relay) mark(ctx context.Context) error {
	if len(r.sent) == 0 {
		return nil
	}
	mctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	if err := r.out.MarkSent(mctx, r.sent); err != nil {
		return fmt.Errorf("relay: mark %d events sent: %w", len(r.sent), err)
	}
	r.sent = r.sent[:0]
	return nil
}
