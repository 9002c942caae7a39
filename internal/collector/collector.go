// Package collector counts the event stream into analytics. On NATS (New):
// a durable JetStream pull consumer on the deployment's event stream
// (event.StreamName, filter event.SubjectFilter); on Kafka (NewKafka): a
// consumer group on event.Topic. Each batch is counted by
// analytics.Analytics.Apply in one SQL transaction and acknowledged (NATS)
// or its offsets committed (Kafka) only after that transaction committed.
// Every event counts once, redeliveries and re-publications included.
// Collectors with the same Options.Durable share the work.
//
// Limits: one fetch loop; a batch is at most Options.Batch events and one
// transaction. On NATS a failed batch comes back after Options.RetryAfter,
// and one whose transaction outlasts Options.AckWait is delivered again
// meanwhile (harmless); on Kafka a failed batch is retried in place, the
// partitions held meanwhile. See docs/architecture.md#the-collector-and-analytics.
package collector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"usher/internal/analytics"
	"usher/internal/event"
)

// Options tune a Collector. The zero value is the default.
type Options struct {
	// Prefix is the deployment's name on NATS (usher serve --nats-name).
	// Default "usher".
	Prefix string
	// Durable names the consumer. Default "collector".
	Durable string
	// Batch is the most events fetched and counted in one transaction.
	// Default 256.
	Batch int
	// AckWait is how long the server waits for an ack before delivering a
	// message again. Default 30 s.
	AckWait time.Duration
	// FetchWait is how long an idle pull waits; it also bounds how long
	// Run takes to return once ctx ends. Default 1 s.
	FetchWait time.Duration
	// RetryAfter is the pause after a fault (no stream yet, the database
	// down) and the delay before a failed batch comes back. Default 2 s.
	RetryAfter time.Duration
	// PruneEvery is how often the analytics are pruned. Default 1 min.
	PruneEvery time.Duration
	// Timeout bounds each call to NATS and each transaction. Default 10 s.
	Timeout time.Duration
	// Registerer, when set, receives usher_collect_events_total{outcome}
	// and usher_collect_pending.
	Registerer prometheus.Registerer
	// Logger receives faults. Default: discard.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = "usher"
	}
	if o.Durable == "" {
		o.Durable = "collector"
	}
	if o.Batch <= 0 {
		o.Batch = 256
	}
	if o.AckWait <= 0 {
		o.AckWait = 30 * time.Second
	}
	if o.FetchWait <= 0 {
		o.FetchWait = time.Second
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = 2 * time.Second
	}
	if o.PruneEvery <= 0 {
		o.PruneEvery = time.Minute
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Log attribute keys.
const (
	logErr    = "err"
	logStream = "stream"
	logCount  = "count"
	logSubj   = "subject"
)

// Collector consumes the event stream into analytics.
type Collector struct {
	nc      *nats.Conn  // New's
	kc      *kgo.Client // NewKafka's
	a       *analytics.Analytics
	o       Options
	log     *slog.Logger
	events  *prometheus.CounterVec
	pending prometheus.Gauge
}

// New returns a collector on nc (which it does not own: close it after Run
// returned). It starts nothing.
func New(nc *nats.Conn, a *analytics.Analytics, o Options) (*Collector, error) {
	if nc == nil {
		return nil, errors.New("collector: want a NATS connection")
	}
	c, err := newCollector(a, o)
	if err != nil {
		return nil, err
	}
	c.nc = nc
	return c, nil
}

func newCollector(a *analytics.Analytics, o Options) (*Collector, error) {
	o = o.withDefaults()
	if a == nil {
		return nil, errors.New("collector: want analytics")
	}
	c := &Collector{a: a, o: o, log: o.Logger,
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_collect_events_total",
			Help: "Events the collector handled, by outcome: applied, duplicate, too_old, malformed.",
		}, []string{"outcome"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "usher_collect_pending",
			Help: "Events in the stream not yet delivered to the collector (its lag), as of its last fetch.",
		}),
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(c.events); err != nil {
			return nil, fmt.Errorf("collector: metrics: %w", err)
		}
		if err := o.Registerer.Register(c.pending); err != nil {
			return nil, fmt.Errorf("collector: metrics: %w", err)
		}
	}
	return c, nil
}

// Run binds the consumer and counts batches until ctx ends; then it returns
// nil. The producers create the stream: until it exists Run logs and
// retries, then binds to it whoever made it. A restarted collector resumes
// after the acknowledged part of the stream. Malformed messages are
// terminated and logged, never retried. Run returns an error when the
// connection is closed for good.
func (c *Collector) Run(ctx context.Context) error {
	if c.kc != nil {
		return c.runKafka(ctx)
	}
	js, err := jetstream.New(c.nc, jetstream.WithDefaultTimeout(c.o.Timeout))
	if err != nil {
		return fmt.Errorf("collector: %w", err)
	}
	stream := event.StreamName(c.o.Prefix)
	nextPrune := time.Time{}
	missing := false // the stream was found missing already
	for ctx.Err() == nil {
		if c.nc.IsClosed() {
			return fmt.Errorf("collector: %w", nats.ErrConnectionClosed)
		}
		cons, err := c.bind(ctx, js, stream)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				// Once at warn, then at debug: a deployment that has not
				// published yet is not a fault worth a line every RetryAfter.
				level := slog.LevelWarn
				if missing {
					level = slog.LevelDebug
				}
				missing = true
				c.log.Log(ctx, level, "collect: event stream not found; waiting for the producers to create it", logStream, stream)
			} else {
				c.log.Warn("collect: bind the consumer", logStream, stream, logErr, err)
			}
			sleep(ctx, c.o.RetryAfter)
			continue
		}
		missing = false
		c.log.Info("collect: consuming", logStream, stream, "consumer", c.o.Durable)
		if err := c.consume(ctx, cons, &nextPrune); err != nil && ctx.Err() == nil {
			if c.nc.IsClosed() {
				return fmt.Errorf("collector: %w", nats.ErrConnectionClosed)
			}
			c.log.Warn("collect: consumer lost, binding again", logErr, err)
			sleep(ctx, c.o.RetryAfter)
		}
	}
	return nil
}

func (c *Collector) bind(ctx context.Context, js jetstream.JetStream, stream string) (jetstream.Consumer, error) {
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	return s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       c.o.Durable,
		Description:   "usher: counts events into analytics",
		FilterSubject: event.SubjectFilter(c.o.Prefix),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.o.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 4 * c.o.Batch,
	})
}

// consume fetches and counts batches until ctx ends or the consumer or the
// stream is gone (an error: bind again).
func (c *Collector) consume(ctx context.Context, cons jetstream.Consumer, nextPrune *time.Time) error {
	for ctx.Err() == nil {
		if now := time.Now(); now.After(*nextPrune) {
			*nextPrune = now.Add(c.o.PruneEvery)
			pctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
			if err := c.a.Prune(pctx); err != nil {
				c.log.Warn("collect: prune", logErr, err)
			}
			cancel()
		}
		// Wait up to FetchWait for the first message, then take whatever
		// else is there at once (natsmq's pattern: no waiting for a batch to
		// fill on a quiet stream, no FetchContext cut short by ctx).
		msgs, err := fetch(func() (jetstream.MessageBatch, error) { return cons.Fetch(1, jetstream.FetchMaxWait(c.o.FetchWait)) })
		if err == nil && len(msgs) == 1 && c.o.Batch > 1 {
			var more []jetstream.Msg
			more, err = fetch(func() (jetstream.MessageBatch, error) { return cons.FetchNoWait(c.o.Batch - 1) })
			msgs = append(msgs, more...)
		}
		if len(msgs) > 0 {
			if ctx.Err() != nil {
				for _, m := range msgs {
					_ = m.Nak()
				}
				return nil
			}
			c.handle(ctx, msgs)
		}
		if err != nil {
			if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
				errors.Is(err, jetstream.ErrStreamNotFound) || c.nc.IsClosed() {
				return err
			}
			c.log.Warn("collect: fetch", logErr, err)
			if len(msgs) == 0 {
				sleep(ctx, c.o.RetryAfter)
			}
		}
	}
	return nil
}

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

// handle counts one batch and acknowledges it, or hands it back.
func (c *Collector) handle(ctx context.Context, msgs []jetstream.Msg) {
	evs := make([]event.Event, 0, len(msgs))
	keep := make([]jetstream.Msg, 0, len(msgs))
	for _, m := range msgs {
		e, ok := c.decode(m.Data(), logSubj, m.Subject())
		if !ok {
			_ = m.TermWithReason("malformed event")
			continue
		}
		evs, keep = append(evs, e), append(keep, m)
		if md, err := m.Metadata(); err == nil {
			c.pending.Set(float64(md.NumPending))
		}
	}
	if len(evs) == 0 {
		return
	}
	if err := c.apply(ctx, evs); err != nil {
		c.log.Warn("collect: batch failed, delivered again later", logCount, len(evs), logErr, err)
		for _, m := range keep {
			_ = m.NakWithDelay(c.o.RetryAfter) // lost, it comes back after AckWait
		}
		return
	}
	for _, m := range keep {
		if err := m.Ack(); err != nil {
			c.log.Warn("collect: ack (the event comes again and counts nothing)", logErr, err)
		}
	}
}

// decode returns the event a message carries, or false when it is
// malformed (logged with where, and counted).
func (c *Collector) decode(data []byte, whereKey, where string) (event.Event, bool) {
	var e event.Event
	err := json.Unmarshal(data, &e)
	if err == nil {
		err = analytics.Valid(e)
	}
	if err != nil {
		c.log.Error("collect: malformed event dropped", whereKey, where, logErr, err)
		c.events.WithLabelValues("malformed").Inc()
		return event.Event{}, false
	}
	return e, true
}

// apply counts evs in one transaction and the outcomes in the metrics.
// The transaction runs to its end even if ctx ends now: a commit whose
// acknowledgement is lost is what the IDs are for, a half-done one cannot
// happen.
func (c *Collector) apply(ctx context.Context, evs []event.Event) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.o.Timeout)
	res, err := c.a.Apply(actx, evs)
	cancel()
	if err != nil {
		return err
	}
	c.events.WithLabelValues("applied").Add(float64(res.Applied))
	c.events.WithLabelValues("duplicate").Add(float64(res.Duplicate))
	c.events.WithLabelValues("too_old").Add(float64(res.TooOld))
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
