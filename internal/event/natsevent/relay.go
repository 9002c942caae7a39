package natsevent

import (
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"usher/internal/event"
)

// Outbox is the part of booking.Store the relay reads.
type Outbox = event.Outbox

// RelayOptions tune a Relay. Zero values take the defaults noted.
type RelayOptions struct {
	// Prefix is the deployment's name (--nats-name). Default "usher".
	Prefix string
	// Batch, Every, RetryAfter and Timeout are event.RelayOptions'.
	Batch                      int
	Every, RetryAfter, Timeout time.Duration
	Metrics                    *Metrics
	Logger                     *slog.Logger
}

// Relay is event.Relay on the stream: the stream's duplicate window drops
// the copies several relays (or a relay that died before marking) publish.
type Relay struct {
	*event.Relay
	sink *sink
}

// NewRelay returns a relay from out to nc's JetStream. It starts nothing.
func NewRelay(out Outbox, nc *nats.Conn, o RelayOptions) (*Relay, error) {
	if o.Prefix == "" {
		o.Prefix = "usher"
	}
	if o.Batch <= 0 {
		o.Batch = 256
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*o.Batch))
	if err != nil {
		return nil, err
	}
	s := &sink{nc: nc, js: js, prefix: o.Prefix}
	ro := event.RelayOptions{Batch: o.Batch, Every: o.Every, RetryAfter: o.RetryAfter, Timeout: o.Timeout, Logger: o.Logger}
	if o.Metrics != nil {
		ro.Counter, ro.Failed = o.Metrics.Outbox(), o.Metrics.RelayFailed
	}
	return &Relay{Relay: event.NewRelay(out, s, ro), sink: s}, nil
}

// Duplicates returns how many of this relay's publications the stream
// acknowledged as duplicates of an earlier one (and dropped).
func (r *Relay) Duplicates() int { return int(r.sink.duplicates.Load()) }
