package kafkaevent

import (
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"usher/internal/event"
)

// Outbox is the part of booking.Store the relay reads.
type Outbox = event.Outbox

// RelayOptions tune a Relay; event.RelayOptions' defaults.
type RelayOptions struct {
	// Prefix is the deployment's name (--nats-name). Default "usher".
	Prefix string
	// Batch, Every, RetryAfter and Timeout are event.RelayOptions'.
	Batch                      int
	Every, RetryAfter, Timeout time.Duration
	Metrics                    *Metrics
	Logger                     *slog.Logger
}

// Relay is event.Relay on the topic. Kafka keeps no duplicate window: a
// relay that dies between producing and marking leaves copies under one
// ID in the topic, which the collector counts once.
type Relay = event.Relay

// NewRelay returns a relay from out to cl's cluster. It starts nothing.
func NewRelay(out Outbox, cl *kgo.Client, o RelayOptions) (*Relay, error) {
	if out == nil || cl == nil {
		return nil, errors.New("kafkaevent: relay: want an outbox and a client")
	}
	if o.Prefix == "" {
		o.Prefix = "usher"
	}
	ro := event.RelayOptions{Batch: o.Batch, Every: o.Every, RetryAfter: o.RetryAfter, Timeout: o.Timeout, Logger: o.Logger}
	if o.Metrics != nil {
		ro.Counter, ro.Failed = o.Metrics.Outbox(), o.Metrics.RelayFailed
	}
	return event.NewRelay(out, &sink{cl: cl, prefix: o.Prefix}, ro), nil
}
