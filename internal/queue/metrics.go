package queue

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the queue's Prometheus metrics. A nil *Metrics records nothing.
// Rooms are created by operators, so the room label stays bounded.
type Metrics struct {
	waiting    *prometheus.GaugeVec
	active     *prometheus.GaugeVec
	enters     *prometheus.CounterVec
	polls      *prometheus.CounterVec
	admissions *prometheus.CounterVec
	expired    *prometheus.CounterVec
	step       *prometheus.HistogramVec
	stepErrors *prometheus.CounterVec
	rate       *prometheus.GaugeVec
	originP95  *prometheus.GaugeVec
	targetP95  *prometheus.GaugeVec
}

// NewMetrics registers the queue's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usher_waiting", Help: "Visitors waiting in the room's queue, as last read.",
		}, []string{"room"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usher_active", Help: "Admitted visitors holding an active slot, as last read.",
		}, []string{"room"}),
		enters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_enters_total", Help: "Enter calls by result: queued, passthrough (admitted at once) or existing (re-entry).",
		}, []string{"room", "result"}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_status_polls_total", Help: "Status polls by how they were answered: estimated (no store call) or exact.",
		}, []string{"room", "answer"}),
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_admissions_total", Help: "Visitors admitted by this instance's admission steps.",
		}, []string{"room"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_expired_total", Help: "Active slots removed by this instance's admission steps because they expired.",
		}, []string{"room"}),
		step: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "usher_admission_step_seconds", Help: "Duration of one admission step, store round trip included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14),
		}, []string{"room"}),
		stepErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_admission_step_errors_total", Help: "Admission steps that failed.",
		}, []string{"room"}),
		rate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usher_admit_rate_current", Help: "The admission rate in force (visitors per second): admit_rate, or what the adaptive controller set.",
		}, []string{"room"}),
		originP95: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usher_adaptive_origin_p95_seconds", Help: "Adaptive rooms: the origin's p95 latency in the controller's last window.",
		}, []string{"room"}),
		targetP95: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usher_adaptive_target_p95_seconds", Help: "Adaptive rooms: the p95 the controller holds (target_p95, or 1.5 × the learned unloaded p95).",
		}, []string{"room"}),
	}
	reg.MustRegister(m.waiting, m.active, m.enters, m.polls, m.admissions, m.expired, m.step, m.stepErrors,
		m.rate, m.originP95, m.targetP95)
	return m
}

func (m *Metrics) entered(room string, e Entry, created bool) {
	if m == nil {
		return
	}
	result := "existing"
	switch {
	case created && e.Status == Active:
		result = "passthrough"
	case created:
		result = "queued"
	}
	m.enters.WithLabelValues(room, result).Inc()
}

func (m *Metrics) polled(room string, estimated bool) {
	if m == nil {
		return
	}
	answer := "exact"
	if estimated {
		answer = "estimated"
	}
	m.polls.WithLabelValues(room, answer).Inc()
}

func (m *Metrics) stepped(room string, res AdmitResult, d time.Duration, err error) {
	if m == nil {
		return
	}
	m.step.WithLabelValues(room).Observe(d.Seconds())
	if err != nil {
		m.stepErrors.WithLabelValues(room).Inc()
		return
	}
	m.admissions.WithLabelValues(room).Add(float64(len(res.Admitted)))
	m.expired.WithLabelValues(room).Add(float64(res.Expired))
}

// forget drops the gauges of a room the store no longer has.
func (m *Metrics) forget(room string) {
	if m == nil {
		return
	}
	m.waiting.DeleteLabelValues(room)
	m.active.DeleteLabelValues(room)
	m.rate.DeleteLabelValues(room)
	m.originP95.DeleteLabelValues(room)
	m.targetP95.DeleteLabelValues(room)
}

func (m *Metrics) observed(room string, st Stats) {
	if m == nil {
		return
	}
	m.waiting.WithLabelValues(room).Set(float64(st.Waiting))
	m.active.WithLabelValues(room).Set(float64(st.Active))
	m.rate.WithLabelValues(room).Set(st.Settings.CurrentRate(st.Control))
	if st.Settings.Admission == Adaptive {
		m.originP95.WithLabelValues(room).Set(st.Control.P95.Seconds())
		m.targetP95.WithLabelValues(room).Set(st.Settings.Target(st.Control).Seconds())
	} else {
		m.originP95.DeleteLabelValues(room)
		m.targetP95.DeleteLabelValues(room)
	}
}
