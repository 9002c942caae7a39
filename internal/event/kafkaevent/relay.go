package kafkaevent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"usher/internal/booking"
)

// Outbox is the part of booking.Store the relay reads.
type Outbox interface {
	Outbox(ctx context.Context, limit int) ([]booking.OutboxEvent, error)
	MarkSent(ctx context.Context, seqs []int64) error
}

// RelayOptions tune a Relay; natsevent.RelayOptions' defaults.
type RelayOptions struct {
	// Prefix is the deployment's name (--nats-name). Default "usher".
	Prefix string
	// Batch is the most events read and produced per round. Default 256.
	Batch int
	// Every is the wait after a round that found the outbox empty (or
	// short of a batch). Default 250 ms.
	Every time.Duration
	// RetryAfter is the wait after a failed round. Default 1 s.
	RetryAfter time.Duration
	// Timeout bounds each database call and each batch's acknowledgements.
	// Default 5 s.
	Timeout time.Duration
	Metrics *Metrics
	Logger  *slog.Logger
}

// Relay publishes the outbox at least once: it marks outbox events sent
// only after the brokers acknowledged them, so a relay that dies in between
// produces them again, and the collector drops the copies by their IDs.
// Run (or Round) runs on one goroutine at a time.
type Relay struct {
	out Outbox
	cl  *kgo.Client
	o   RelayOptions
	m   *Metrics
	log *slog.Logger
	// sent holds events acknowledged but not yet marked.
	sent []int64
}

// NewRelay returns a relay from out to cl's cluster. It starts nothing.
func NewRelay(out Outbox, cl *kgo.Client, o RelayOptions) (*Relay, error) {
	if out == nil || cl == nil {
		return nil, errors.New("kafkaevent: relay: want an outbox and a client")
	}
	if o.Prefix == "" {
		o.Prefix = "usher"
	}
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
	return &Relay{out: out, cl: cl, o: o, m: o.Metrics, log: o.Logger}, nil
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
			r.m.relayError()
			r.log.Warn("relay the outbox", "err", err)
			wait = r.o.RetryAfter
		case n == r.o.Batch:
			continue
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
// events, produces them, waits for the acknowledgements and marks the
// acknowledged ones sent. It returns how many it read.
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
	recs := make([]*kgo.Record, 0, len(events))
	seqs := make([]int64, 0, len(events))
	for _, e := range events {
		rec, err := record(r.o.Prefix, e.Event)
		if err != nil {
			// Producing it again never will.
			r.log.Error("outbox event without an ID, a room or a type: dropped", "seq", e.Seq, "id", e.ID, "room", e.Room, "type", e.Type)
			r.m.droppedN(reasonInvalid, 1)
			r.sent = append(r.sent, e.Seq)
			continue
		}
		recs, seqs = append(recs, rec), append(seqs, e.Seq)
	}
	acked, failed := produce(ctx, r.cl, recs, r.o.Timeout)
	ok := 0
	for i, a := range acked {
		if a {
			ok++
			r.sent = append(r.sent, seqs[i])
		}
	}
	r.m.publishedN(sourceOutbox, ok)
	if err := r.mark(ctx); err != nil {
		return len(events), err
	}
	if failed != nil {
		return len(events), fmt.Errorf("kafkaevent: relay: %d of %d events not acknowledged: %w", len(recs)-ok, len(recs), failed)
	}
	return len(events), nil
}

func (r *Relay) mark(ctx context.Context) error {
	if len(r.sent) == 0 {
		return nil
	}
	mctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	if err := r.out.MarkSent(mctx, r.sent); err != nil {
		return fmt.Errorf("kafkaevent: relay: mark %d events sent: %w", len(r.sent), err)
	}
	r.sent = r.sent[:0]
	return nil
}
