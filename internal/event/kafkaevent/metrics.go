package kafkaevent

import (
	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/event"
)

// Metrics are the event publishers' Prometheus metrics: the names and
// labels natsevent.Metrics has (a deployment runs one of the two), less
// its nats_down reason. A nil *Metrics records nothing.
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
	reasonFailed  = event.ReasonFailed  // the brokers refused it or did not acknowledge it in time
	reasonInvalid = event.ReasonInvalid // no ID, room or type
)

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_events_published_total",
			Help: "Events the Kafka brokers acknowledged, by source: instance (queue, holds, settings: best effort) or outbox (reservation decisions, at least once).",
		}, []string{"source"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_events_dropped_total",
			Help: "Best-effort events (queue, holds, settings) this instance did not publish, by reason: buffer_full, failed (refused or unacknowledged) or invalid.",
		}, []string{"reason"}),
		relayErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "usher_outbox_relay_errors_total",
			Help: "Relay rounds that failed (database or Kafka); the outbox keeps the events and the relay retries.",
		}),
	}
	for _, r := range []string{reasonFull, reasonFailed, reasonInvalid} {
		m.dropped.WithLabelValues(r)
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
