package kafkaevent

import (
	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/event"
)

// Metrics are event.Metrics, Kafka's. A nil *Metrics records nothing.
type Metrics = event.Metrics

// Reasons for a dropped event (label reason).
const (
	reasonFailed  = event.ReasonFailed  // refused, or not acknowledged in time
	reasonInvalid = event.ReasonInvalid // no topic record can carry it
)

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	return event.NewMetrics(reg, "Kafka")
}
