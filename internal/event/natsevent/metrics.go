package natsevent

import (
	"encoding/json"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/event"
)

// Metrics are event.Metrics, NATS's. A nil *Metrics records nothing.
type Metrics = event.Metrics

// Reasons for a dropped event (label reason).
const (
	reasonFailed  = event.ReasonFailed  // refused, or not acknowledged in time
	reasonInvalid = event.ReasonInvalid // no subject can carry it
	reasonDown    = "nats_down"         // the connection was not connected
)

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	return event.NewMetrics(reg, "NATS", reasonDown)
}

func jsonEvent(e event.Event) ([]byte, error) { return json.Marshal(e) }
