package gateway

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the proxy's view of the origin, per room. Gated requests'
// latencies and failures also feed the room's adaptive admission
// (queue.Queue.Observe, in proxy.go).
type metrics struct {
	inflight  *prometheus.GaugeVec
	latency   *prometheus.HistogramVec
	responses *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, bypass []*BypassRule) *metrics {
	m := &metrics{
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usher_proxy_origin_inflight",
			Help: "Requests being served by the origin (until their bodies end), by room.",
		}, []string{"room"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "usher_proxy_origin_seconds",
			Help:    "Time until the origin's response headers (or failure), by room.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 13), // 5ms … ~20s
		}, []string{"room"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_proxy_origin_responses_total",
			Help: "Origin responses by room and status class (1xx…5xx); failures count as the 502 or 504 sent.",
		}, []string{"room", "class"}),
	}
	reg.MustRegister(m.inflight, m.latency, m.responses)
	for _, b := range bypass {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "usher_bypass_total",
			Help:        "Requests a bypass rule let through a gated path without a place in line, by rule (a CIDR prefix or a secret's name).",
			ConstLabels: prometheus.Labels{"rule": b.Name, "kind": b.Kind()},
		}, func() float64 { return float64(b.Passed()) }))
	}
	return m
}

var classes = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

func (m *metrics) observe(room string, status int, d time.Duration) {
	m.latency.WithLabelValues(room).Observe(d.Seconds())
	class := strconv.Itoa(status)
	if i := status/100 - 1; i >= 0 && i < len(classes) {
		class = classes[i]
	}
	m.responses.WithLabelValues(room, class).Inc()
}
