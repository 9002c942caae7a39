package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"

	"usher/internal/booking"
	"usher/internal/event"
	"usher/internal/event/kafkaevent"
	"usher/internal/event/natsevent"
)

// eventsConfig says where the core publishes its events: the event stream
// on nc, or the event topic on kc, named by prefix. The zero value
// publishes none: usher proxy, and serve with --events=false.
type eventsConfig struct {
	nc       *nats.Conn
	kc       *kgo.Client
	prefix   string
	replicas int
}

// eventsTo is where serve's --events sends the events: "nats" (the
// broker's stream), "kafka" (brokers) or "" (none).
type eventsTo struct {
	kind    string
	brokers []string
}

// parseEvents reads --events: true (the NATS stream), false, or
// kafka://host:port[,host:port…].
func parseEvents(spec string) (eventsTo, error) {
	if on, err := strconv.ParseBool(spec); err == nil {
		if on {
			return eventsTo{kind: "nats"}, nil
		}
		return eventsTo{}, nil
	}
	if strings.HasPrefix(spec, "kafka://") {
		brokers, err := kafkaevent.ParseURL(spec)
		if err != nil {
			return eventsTo{}, fmt.Errorf("%s: want kafka://host:port[,host:port…]", sharedSetting("events", spec))
		}
		return eventsTo{kind: "kafka", brokers: brokers}, nil
	}
	return eventsTo{}, fmt.Errorf("%s: want true (the NATS stream <NAME>_EVENTS), false, or kafka://host:port[,host:port…]", sharedSetting("events", spec))
}

// connectTimeout bounds the wait for a first Kafka broker at start.
const connectTimeout = 10 * time.Second

// openKafka connects to brokers (a clear error when none answers within
// connectTimeout) with opts, and creates the event topic of prefix if it
// is missing. setting names the flag in errors.
func openKafka(ctx context.Context, setting string, brokers []string, name, prefix string, cl *closers, opts ...kgo.Opt) (*kgo.Client, error) {
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	kc, err := kafkaevent.Connect(cctx, brokers, name, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", setting, err)
	}
	cl.add(kc.Close)
	if err := kafkaevent.EnsureTopic(cctx, kc, prefix); err != nil {
		return nil, fmt.Errorf("%s: %w", setting, err)
	}
	return kc, nil
}

// ensureEventStream creates or updates the event stream <prefix>_EVENTS on
// nc; serve calls it with the broker's other checks, before it writes into
// the data directory.
func ensureEventStream(ctx context.Context, nc *nats.Conn, prefix string, replicas int) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	if _, err := natsevent.EnsureStream(ctx, js, prefix, replicas); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	return nil
}

// publisher is an event publisher: natsevent's or kafkaevent's.
type publisher interface {
	event.Offerer
	Run(ctx context.Context) error
}

// openEvents is the switch that picks the core's event publisher (not
// started: core.run runs it).
func (k *core) openEvents(ec eventsConfig) error {
	k.eventsConf = ec
	log := k.log.With("component", "events")
	switch {
	case ec.kc != nil:
		k.kafkaMetrics = kafkaevent.NewMetrics(k.reg)
		p, err := kafkaevent.NewPublisher(ec.kc, kafkaevent.PublisherOptions{Prefix: ec.prefix, Metrics: k.kafkaMetrics, Logger: log})
		if err != nil {
			return fmt.Errorf("events: %w", err)
		}
		k.events = p
	case ec.nc != nil:
		k.natsMetrics = natsevent.NewMetrics(k.reg)
		p, err := natsevent.NewPublisher(ec.nc, natsevent.PublisherOptions{Prefix: ec.prefix, Metrics: k.natsMetrics, Logger: log})
		if err != nil {
			return fmt.Errorf("events: %w", err)
		}
		k.events = p
	}
	return nil
}

// emitter is the core's event emitter, or nil (an untyped nil: no events).
func (k *core) emitter() event.Emitter {
	if k.events == nil {
		return nil
	}
	return k.events
}

// relay returns the outbox relay of catalog to where the events go, or nil
// without events.
func (k *core) relay(catalog booking.Store) (func(context.Context) error, error) {
	log := k.log.With("component", "outbox")
	switch {
	case k.eventsConf.kc != nil:
		r, err := kafkaevent.NewRelay(catalog, k.eventsConf.kc, kafkaevent.RelayOptions{Prefix: k.eventsConf.prefix, Metrics: k.kafkaMetrics, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
		return r.Run, nil
	case k.eventsConf.nc != nil:
		r, err := natsevent.NewRelay(catalog, k.eventsConf.nc, natsevent.RelayOptions{Prefix: k.eventsConf.prefix, Metrics: k.natsMetrics, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
		return r.Run, nil
	}
	return nil, nil
}
