package natsevent

import (
	"encoding/json"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/event"
)

// Metrics are the event publishers' Prometheus metrics. A nil *Metrics
// records nothing.
type Metrics struct {
	published *prometheus.CounterVec
	dropped   *prometheus.CounterVec
	relayErrs prometheus.Counter
}

// Sources of published events (label source).
const (
	sourceInstance = "instance" // the Publisher: queue, holds, settings
	sourceOutbox   = "outbox"   // the Relay: reservation decisions
)

// Reasons for a dropped event (label reason).
const (
	reasonFull    = event.ReasonFull    // Emit found the buffer full
	reasonDown    = "nats_down"         // the connection was not connected
	reasonFailed  = event.ReasonFailed  // the server refused it or did not acknowledge it in time
	reasonInvalid = event.ReasonInvalid // no subject can carry it
)

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_events_published_total",
			Help: "Events the event stream acknowledged, by source: instance (queue, holds, settings: best effort) or outbox (reservation decisions, at least once; a re-publication the stream dropped as a duplicate counts too).",
		}, []string{"source"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_events_dropped_total",
			Help: "Best-effort events (queue, holds, settings) this instance did not publish, by reason: buffer_full, nats_down, failed (refused or unacknowledged) or invalid.",
		}, []string{"reason"}),
		relayErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "usher_outbox_relay_errors_total",
			Help: "Relay rounds that failed (database or NATS); the outbox keeps the events and the relay retries.",
		}),
	}
	for _, r := range []string{reasonFull, reasonDown, reasonFailed, reasonInvalid} {
		m.dropped.WithLabelValues(r) // present at 0, so that rate() and alerts see it
	}
	for _, s := range []string{sourceInstance, sourceOutbox} {
		m.published.WithLabelValues(s)
	}
	reg.MustRegister(m.published, m.dropped, m.relayErrs)
	return m
}

func (m *Metrics) publishedN(source string, n int) {
	if m != nil && n > 0 {
		m.published.WithLabelValues(source).Add(float64(n))
	}
}

func (m *Metrics) droppedN(reason string, n int) {
	if m != nil && n > 0 {
		m.dropped.WithLabelValues(reason).Add(float64(n))
	}
}

func (m *Metrics) relayError() {
	if m != nil {
		m.relayErrs.Inc()
	}
}

func jsonEvent(e event.Event) ([]byte, error) { return json.Marshal(e) }
