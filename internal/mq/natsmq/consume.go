package natsmq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"usher/internal/booking"
	"usher/internal/mq"
)

// Consume implements mq.Broker. It creates or updates the durable consumer
// (MaxAckPending = Workers×MaxBatch, AckWait from Options), then runs
// Workers loops until ctx ends, and returns nil. It returns an error if the
// options are invalid, if the consumer cannot be set up, or (wrapping
// mq.ErrUnavailable) once the connection is closed for good; other faults
// (a server that is away, a failing handler) are logged and retried. A
// RetryAfter of zero redelivers a failed batch at once. Every Consume on the
// stream shares one ack-pending cap, set by the last to start.
//
// A batch the handler decided after ctx ended is still recorded and
// acknowledged (the database holds the decision already); a batch fetched
// after ctx ended is handed back to the server at once.
func (b *Broker) Consume(ctx context.Context, o mq.ConsumeOptions, h mq.Handler) error {
	if o.Workers < 1 || o.MaxBatch < 1 || o.RetryAfter < 0 {
		return fmt.Errorf("natsmq: consume: want Workers ≥ 1, MaxBatch ≥ 1, RetryAfter ≥ 0, got %d, %d, %v",
			o.Workers, o.MaxBatch, o.RetryAfter)
	}
	if err := b.ready(); err != nil {
		return b.unavailable("consume", err)
	}
	sctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	c, err := b.js.CreateOrUpdateConsumer(sctx, b.stream, jetstream.ConsumerConfig{
		Durable:       consumerName,
		Description:   "usher: decides reservations at the database's pace",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       b.o.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: o.Workers * o.MaxBatch,
	})
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return b.setupError("consume: consumer "+consumerName, err)
	}
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Go(func() { b.work(ctx, c, o, h) })
	}
	wg.Wait()
	if ctx.Err() == nil { // the workers stopped on their own
		return b.unavailable("consume", nats.ErrConnectionClosed)
	}
	return nil
}

// work fetches and handles batches until ctx ends or the connection is
// closed.
func (b *Broker) work(ctx context.Context, c jetstream.Consumer, o mq.ConsumeOptions, h mq.Handler) {
	for ctx.Err() == nil {
		// Wait up to FetchWait for the first message, then take at once
		// whatever else is there: a full batch under load, no waiting for
		// one to fill when the stream is quiet. No FetchContext: a pull cut
		// short by ctx would leave the messages the server is sending unseen
		// until AckWait.
		msgs, err := fetch(func() (jetstream.MessageBatch, error) {
			return c.Fetch(1, jetstream.FetchMaxWait(b.o.FetchWait))
		})
		if err == nil && len(msgs) == 1 && o.MaxBatch > 1 {
			var more []jetstream.Msg
			more, err = fetch(func() (jetstream.MessageBatch, error) { return c.FetchNoWait(o.MaxBatch - 1) })
			msgs = append(msgs, more...)
		}
		if err != nil {
			if b.nc.IsClosed() {
				b.log.Error("consume: connection closed, stopping", logErr, err)
				return
			}
			b.log.Warn("consume: fetch", logErr, err, logCount, len(msgs))
			if len(msgs) == 0 {
				sleep(ctx, b.o.FetchWait)
			}
		}
		if len(msgs) == 0 {
			continue
		}
		if ctx.Err() != nil {
			for _, m := range msgs {
				_ = m.Nak() // to another consumer now; lost, they come back after AckWait
			}
			return
		}
		b.handle(ctx, msgs, o, h)
	}
}

// fetch runs one pull and collects its messages; on an error it returns
// the messages that did arrive.
func fetch(pull func() (jetstream.MessageBatch, error)) ([]jetstream.Msg, error) {
	batch, err := pull()
	if err != nil {
		return nil, err
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	return msgs, batch.Error()
}

// recordConcurrency is how many decisions of a batch are written to the
// bucket at once.
const recordConcurrency = 16

// handle decodes a batch, calls h, records the decisions and acknowledges.
func (b *Broker) handle(ctx context.Context, msgs []jetstream.Msg, o mq.ConsumeOptions, h mq.Handler) {
	rs := make([]booking.Reservation, 0, len(msgs))
	ms := make([]jetstream.Msg, 0, len(msgs))
	for _, m := range msgs {
		var r booking.Reservation
		err := json.Unmarshal(m.Data(), &r)
		if err == nil && (r.ID == "" || r.Status != booking.Pending) {
			err = errors.New("not a pending reservation")
		}
		if err != nil {
			b.log.Error("consume: malformed message terminated", logSubject, m.Subject(), logErr, err)
			if err := m.TermWithReason("malformed reservation"); err != nil {
				b.log.Warn("consume: term", logErr, err)
			}
			continue
		}
		rs = append(rs, r)
		ms = append(ms, m)
	}
	if len(rs) == 0 {
		return
	}
	stop := b.keepAlive(ctx, ms)
	defer stop()

	out, err := call(ctx, h, rs)
	if err == nil && len(out) != len(rs) {
		err = fmt.Errorf("handler returned %d reservations for %d", len(out), len(rs))
	}
	for i := 0; err == nil && i < len(out); i++ {
		if out[i].ID != rs[i].ID {
			err = fmt.Errorf("handler returned %q at %d, want %q", out[i].ID, i, rs[i].ID)
		}
	}
	if err != nil {
		b.log.Warn("consume: batch failed, redelivered later", logCount, len(rs), logRetry, o.RetryAfter, logErr, err)
		for _, m := range ms {
			nak(m, o.RetryAfter)
		}
		return
	}
	// The database holds these decisions now: record them even if ctx ended.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.o.Timeout)
	defer cancel()
	var wg sync.WaitGroup
	sem := make(chan struct{}, recordConcurrency)
	for i, r := range out {
		if !decided(r) {
			b.log.Warn("consume: handler left a reservation undecided, redelivered later", logID, r.ID)
			nak(ms[i], o.RetryAfter)
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			data, err := json.Marshal(r)
			if err == nil {
				_, err = b.kv.Put(wctx, stateKey(r.ID), data)
			}
			if err != nil {
				b.log.Warn("consume: record decision, redelivered later", logID, r.ID, logErr, err)
				nak(ms[i], o.RetryAfter)
				return
			}
			if err := ms[i].Ack(); err != nil {
				// Redelivered after AckWait; Decide returns the same decision.
				b.log.Warn("consume: ack", logID, r.ID, logErr, err)
			}
		})
	}
	wg.Wait()
}

// keepAlive tells the server every AckWait/3 that ms are being worked on,
// until stop is called or ctx ends; after that, AckWait runs again.
func (b *Broker) keepAlive(ctx context.Context, ms []jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(b.o.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				for _, m := range ms {
					_ = m.InProgress() // a failure shows as a redelivery
				}
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// call runs h, turning a panic into an error so that one bad batch does not
// take the process down; the batch is redelivered like any failed one.
func call(ctx context.Context, h mq.Handler, rs []booking.Reservation) (out []booking.Reservation, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return h(ctx, rs)
}

func nak(m jetstream.Msg, delay time.Duration) {
	if delay > 0 {
		_ = m.NakWithDelay(delay) // lost, the message comes back after AckWait
		return
	}
	_ = m.Nak()
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
