package main

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"usher/internal/booking"
	"usher/internal/event"
	"usher/internal/event/natsevent"
)

// eventsConfig says where the core publishes its events (the event stream
// on nc, named by prefix); the zero value publishes none: usher proxy, and
// serve with --events=false.
type eventsConfig struct {
	nc       *nats.Conn
	prefix   string
	replicas int
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

// openEvents builds the core's publisher on the stream ensureEventStream
// made (not started: core.run runs it).
func (k *core) openEvents(ec eventsConfig) error {
	if ec.nc == nil {
		return nil
	}
	k.eventsConf = ec
	k.eventMetrics = natsevent.NewMetrics(k.reg)
	var err error
	k.events, err = natsevent.NewPublisher(ec.nc, natsevent.PublisherOptions{
		Prefix: ec.prefix, Metrics: k.eventMetrics, Logger: k.log.With("component", "events"),
	})
	if err != nil {
		return fmt.Errorf("events: %w", err)
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

// relay returns the outbox relay of catalog, or nil without events.
func (k *core) relay(catalog booking.Store) (*natsevent.Relay, error) {
	if k.events == nil {
		return nil, nil
	}
	r, err := natsevent.NewRelay(catalog, k.eventsConf.nc, natsevent.RelayOptions{
		Prefix: k.eventsConf.prefix, Metrics: k.eventMetrics, Logger: k.log.With("component", "outbox"),
	})
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	return r, nil
}
