package event

import "github.com/prometheus/client_golang/prometheus"

// Metrics are an event transport's Prometheus metrics, the same names for
// every transport (a deployment runs one). A nil *Metrics records nothing.
type Metrics struct {
	published *prometheus.CounterVec
	dropped   *prometheus.CounterVec
	relayErrs prometheus.Counter
}

// NewMetrics registers the metrics with reg. transport names the broker in
// the help texts; reasons are its own reasons for a dropped event besides
// ReasonFull, ReasonFailed and ReasonInvalid. Every label value is present
// at 0, so that rate() and alerts see it.
func NewMetrics(reg prometheus.Registerer, transport string, reasons ...string) *Metrics {
	m := &Metrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_events_published_total",
			Help: "Events " + transport + " acknowledged, by source: instance (queue, holds, settings: best effort) or outbox (reservation decisions, at least once).",
		}, []string{"source"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_events_dropped_total",
			Help: "Best-effort events (queue, holds, settings) this instance did not publish, by reason: buffer_full, failed (refused or unacknowledged), invalid, or the transport's own.",
		}, []string{"reason"}),
		relayErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "usher_outbox_relay_errors_total",
			Help: "Relay rounds that failed (database or " + transport + "); the outbox keeps the events and the relay retries.",
		}),
	}
	for _, r := range append([]string{ReasonFull, ReasonFailed, ReasonInvalid}, reasons...) {
		m.dropped.WithLabelValues(r)
	}
	for _, s := range []string{sourceInstance, sourceOutbox} {
		m.published.WithLabelValues(s)
	}
	reg.MustRegister(m.published, m.dropped, m.relayErrs)
	return m
}

// Sources of published events (label source).
const (
	sourceInstance = "instance" // the Publisher: queue, holds, settings
	sourceOutbox   = "outbox"   // the Relay: reservation decisions
)

// Instance is the Publisher's Counter (source instance), Outbox the
// Relay's (source outbox); nil for a nil m.
func (m *Metrics) Instance() Counter { return m.counter(sourceInstance) }
func (m *Metrics) Outbox() Counter   { return m.counter(sourceOutbox) }

func (m *Metrics) counter(source string) Counter {
	if m == nil {
		return nil
	}
	return sourceCounter{m, source}
}

// RelayFailed counts a failed relay round (RelayOptions.Failed).
func (m *Metrics) RelayFailed() {
	if m != nil {
		m.relayErrs.Inc()
	}
}

type sourceCounter struct {
	m      *Metrics
	source string
}

func (c sourceCounter) Published(n int) {
	if n > 0 {
		c.m.published.WithLabelValues(c.source).Add(float64(n))
	}
}

func (c sourceCounter) Dropped(reason string, n int) {
	if n > 0 {
		c.m.dropped.WithLabelValues(reason).Add(float64(n))
	}
}
