package queue

import (
	"sync"
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
	rises      *prometheus.CounterVec
	admissions *prometheus.CounterVec
	expired    *prometheus.CounterVec
	absent     *prometheus.CounterVec
	step       *prometheus.HistogramVec
	stepErrors *prometheus.CounterVec
	etaError   *prometheus.HistogramVec
	etaRange   *prometheus.CounterVec
	rate       *prometheus.GaugeVec
	rateSet    *prometheus.GaugeVec
	maxActive  *prometheus.GaugeVec
	originP95  *prometheus.GaugeVec
	targetP95  *prometheus.GaugeVec
	inventory  *prometheus.GaugeVec
	invCap     *prometheus.GaugeVec
	heldPolls  *prometheus.GaugeVec
	// pollsOf caches each room's two polls counters (exact, estimated):
	// a status poll is the hottest call, and WithLabelValues hashes its
	// labels every time.
	pollsOf sync.Map // room → *[2]prometheus.Counter
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
			Name: "usher_enters_total", Help: "Enter calls by result: queued, passthrough (admitted at once), existing (re-entry) or full (refused: max_waiting).",
		}, []string{"room", "result"}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_status_polls_total", Help: "Status polls by how they were answered: estimated (no store call) or exact.",
		}, []string{"room", "answer"}),
		rises: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_position_rises_total", Help: "Status polls whose place came out further back than the client last showed on the same ticket (a rise of the estimate, never of the order): answered with the place shown instead.",
		}, []string{"room"}),
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_admissions_total", Help: "Visitors admitted by this instance's admission steps.",
		}, []string{"room"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_expired_total", Help: "Active slots removed by this instance's admission steps because they expired.",
		}, []string{"room"}),
		absent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_absent_total", Help: "Waiting visitors near the front not seen for the room's presence_timeout, by what this instance's admission steps did: skipped (passed over, place kept) or removed (absent past the grace).",
		}, []string{"room", "action"}),
		step: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "usher_admission_step_seconds", Help: "Duration of one admission step, store round trip included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14),
		}, []string{"room"}),
		stepErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_admission_step_errors_total", Help: "Admission steps that failed.",
		}, []string{"room"}),
		etaError: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "usher_eta_error_ratio",
			Help:    "(actual − predicted) ÷ actual wait of visitors found admitted by a poll on this instance; predicted when their ticket was issued. Positive: waited longer than told.",
			Buckets: []float64{-1, -0.5, -0.25, -0.1, -0.05, 0, 0.05, 0.1, 0.25, 0.5},
		}, []string{"room"}),
		etaRange: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_eta_range_total",
			Help: "Visitors found admitted by a poll on this instance, by where their actual wait fell against the range predicted when their ticket was issued: inside, early (below) or late (above).",
		}, []string{"room", "result"}),
		rate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usher_admit_rate_current", Help: "The admission rate in force (visitors per second): admit_rate, or what the adaptive controller set.",
		}, []string{"room"}),
		rateSet: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usher_admit_rate_configured", Help: "The room's admit_rate setting (visitors per second); adaptive rooms start from it and move between min_admit_rate and max_admit_rate.",
		}, []string{"room"}),
		maxActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usher_max_active", Help: "The room's max_active setting: the most admitted visitors holding a slot at once.",
		}, []string{"room"}),
		originP95: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usher_adaptive_origin_p95_seconds", Help: "Adaptive rooms: the origin's p95 latency in the controller's last window.",
		}, []string{"room"}),
		targetP95: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usher_adaptive_target_p95_seconds", Help: "Adaptive rooms: the p95 the controller holds (target_p95, or 1.5 × the learned unloaded p95).",
		}, []string{"room"}),
		inventory: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usher_inventory_units", Help: "Rooms of a sale: the units (seats or stock) neither sold nor held, as the sale service last counted them. Absent while unknown.",
		}, []string{"room"}),
		invCap: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usher_inventory_cap", Help: "Rooms of a sale: the most visitors the inventory lets hold a slot (visitors_per_unit × units left, at most max_active; 0 when sold out). Absent while the inventory is unknown.",
		}, []string{"room"}),
		heldPolls: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usher_held_polls", Help: "Status polls this instance holds until the visitor's turn (long polls in the turn zone).",
		}, []string{"room"}),
	}
	reg.MustRegister(m.heldPolls, m.waiting, m.active, m.enters, m.polls, m.rises, m.admissions, m.expired, m.absent, m.step, m.stepErrors,
		m.etaError, m.etaRange, m.rate, m.rateSet, m.maxActive, m.originP95, m.targetP95, m.inventory, m.invCap)
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

func (m *Metrics) rose(room string) {
	if m == nil {
		return
	}
	m.rises.WithLabelValues(room).Inc()
}

func (m *Metrics) held(room string, d float64) {
	if m == nil {
		return
	}
	m.heldPolls.WithLabelValues(room).Add(d)
}

func (m *Metrics) polled(room string, estimated bool) {
	if m == nil {
		return
	}
	c, ok := m.pollsOf.Load(room)
	if !ok {
		c, _ = m.pollsOf.LoadOrStore(room, &[2]prometheus.Counter{
			m.polls.WithLabelValues(room, "exact"), m.polls.WithLabelValues(room, "estimated"),
		})
	}
	i := 0
	if estimated {
		i = 1
	}
	c.(*[2]prometheus.Counter)[i].Inc()
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
	if res.Skipped > 0 {
		m.absent.WithLabelValues(room, "skipped").Add(float64(res.Skipped))
	}
	if res.Abandoned > 0 {
		m.absent.WithLabelValues(room, "removed").Add(float64(res.Abandoned))
	}
}

func (m *Metrics) refused(room string) {
	if m != nil {
		m.enters.WithLabelValues(room, "full").Inc()
	}
}

// forget drops the gauges of a room the store no longer has.
func (m *Metrics) forget(room string) {
	if m == nil {
		return
	}
	m.waiting.DeleteLabelValues(room)
	m.active.DeleteLabelValues(room)
	m.rate.DeleteLabelValues(room)
	m.rateSet.DeleteLabelValues(room)
	m.maxActive.DeleteLabelValues(room)
	m.originP95.DeleteLabelValues(room)
	m.targetP95.DeleteLabelValues(room)
	m.inventory.DeleteLabelValues(room)
	m.invCap.DeleteLabelValues(room)
}

func (m *Metrics) observed(room string, st Stats) {
	if m == nil {
		return
	}
	m.waiting.WithLabelValues(room).Set(float64(st.Waiting))
	m.active.WithLabelValues(room).Set(float64(st.Active))
	m.rate.WithLabelValues(room).Set(st.Settings.CurrentRate(st.Control))
	m.rateSet.WithLabelValues(room).Set(st.Settings.AdmitRate)
	m.maxActive.WithLabelValues(room).Set(float64(st.Settings.MaxActive))
	if st.Inventory.Known {
		m.inventory.WithLabelValues(room).Set(float64(st.Inventory.Units))
		m.invCap.WithLabelValues(room).Set(float64(InventoryCap(st.Settings, st.Inventory)))
	} else {
		m.inventory.DeleteLabelValues(room)
		m.invCap.DeleteLabelValues(room)
	}
	if st.Settings.Admission == Adaptive {
		m.originP95.WithLabelValues(room).Set(st.Control.P95.Seconds())
		m.targetP95.WithLabelValues(room).Set(st.Settings.Target(st.Control).Seconds())
	} else {
		m.originP95.DeleteLabelValues(room)
		m.targetP95.DeleteLabelValues(room)
	}
}

// ETAErrors is usher_eta_error_ratio alone, to register in a registry of
// its own for a reader that wants only it (the console, every second):
// gathering the whole registry costs every room's gauges, most of the
// console's sampling at 10,000 rooms.
func (m *Metrics) ETAErrors() prometheus.Collector { return m.etaError }

// etaObserved records one admitted visitor's actual wait against the
// forecast made when its ticket was issued.
func (m *Metrics) etaObserved(room string, actual time.Duration, f Forecast) {
	m.etaError.WithLabelValues(room).Observe((actual - f.ETA).Seconds() / actual.Seconds())
	result := "inside"
	switch {
	case actual < f.Low:
		result = "early"
	case actual > f.High:
		result = "late"
	}
	m.etaRange.WithLabelValues(room, result).Inc()
}
