package natsevent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"usher/internal/booking"
)

// Outbox is the part of booking.Store the relay reads.
type Outbox interface {
	Outbox(ctx context.Context, limit int) ([]booking.OutboxEvent, error)
	MarkSent(ctx context.Context, seqs []int64) error
}

// RelayOptions tune a Relay. Zero values take the defaults noted.
type RelayOptions struct {
	// Prefix is the deployment's name (--nats-name). Default "usher".
	Prefix string
	// Batch is the most events read and published per round. Default 256.
	Batch int
	// Every is how long the relay waits after a round that found the
	// outbox empty (or short of a batch): how late a decision's event may
	// be. Default 250 ms.
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
// only after the stream acknowledged them, so a relay that dies in between
// publishes them again, and the stream's duplicate window and the
// collector drop the copies. Run (or Round) runs on one goroutine at a time.
// Several relays on one database (one per instance) publish the same
// events; the stream drops the copies within its duplicate window.
type Relay struct {
	out Outbox
	nc  *nats.Conn
	js  jetstream.JetStream
	o   RelayOptions
	m   *Metrics
	log *slog.Logger
	// sent holds events acknowledged but not yet marked: the next round
	// marks them before it reads, so that a failed mark does not publish
	// them again while the relay runs.
	sent []int64
	// duplicates counts acknowledgements that the stream flagged as
	// duplicates (re-publications it dropped).
	duplicates int
}

// NewRelay returns a relay from out to nc's JetStream. It starts nothing.
func NewRelay(out Outbox, nc *nats.Conn, o RelayOptions) (*Relay, error) {
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
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*o.Batch))
	if err != nil {
		return nil, err
	}
	return &Relay{out: out, nc: nc, js: js, o: o, m: o.Metrics, log: o.Logger}, nil
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
			continue // more waiting
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// Round marks what the last round could not, then reads up to Batch
// events, publishes them, waits for the stream's acknowledgements and marks
// the acknowledged ones sent. It returns how many it read. Events the
// stream did not acknowledge stay in the outbox for the next round.
func (r *Relay) Round(ctx context.Context) (int, error) {
	if err := r.mark(ctx); err != nil {
		return 0, err
	}
	if !r.nc.IsConnected() {
		return 0, fmt.Errorf("natsevent: relay: connection %s", r.nc.Status())
	}
	rctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	events, err := r.out.Outbox(rctx, r.o.Batch)
	cancel()
	if err != nil || len(events) == 0 {
		return 0, err
	}
	futures := make([]jetstream.PubAckFuture, 0, len(events))
	seqs := make([]int64, 0, len(events))
	var failed error
	for _, e := range events {
		f, err := publishAsync(r.js, r.o.Prefix, e.Event)
		switch {
		case errors.Is(err, errInvalid):
			// No subject can carry it: publishing it again never will.
			r.log.Error("outbox event without a valid room or type: dropped", "seq", e.Seq, "id", e.ID, "room", e.Room, "type", e.Type)
			r.m.droppedN(reasonInvalid, 1)
			r.sent = append(r.sent, e.Seq)
		case err != nil:
			failed = err
		default:
			futures = append(futures, f)
			seqs = append(seqs, e.Seq)
		}
	}
	acked, dups := awaitAcks(ctx, futures, r.o.Timeout)
	r.duplicates += dups
	ok, notAcked := count(acked)
	for i, a := range acked {
		if a {
			r.sent = append(r.sent, seqs[i])
		}
	}
	r.m.publishedN(sourceOutbox, ok)
	if err := r.mark(ctx); err != nil {
		return len(events), err
	}
	if failed == nil && notAcked > 0 {
		failed = fmt.Errorf("%d of %d events not acknowledged", notAcked, len(futures))
	}
	if failed != nil {
		return len(events), fmt.Errorf("natsevent: relay: publish: %w", failed)
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
		return fmt.Errorf("natsevent: relay: mark %d events sent: %w", len(r.sent), err)
	}
	r.sent = r.sent[:0]
	return nil
}

// Duplicates returns how many of this relay's publications the stream
// acknowledged as duplicates of an earlier one (and dropped).
func (r *Relay) Duplicates() int { return r.duplicates }
