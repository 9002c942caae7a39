package sale

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/booking"
	"usher/internal/hold"
	"usher/internal/mq"
)

// metrics are the booking flow's Prometheus metrics (Config.Registry). A
// nil *metrics records nothing. Labels stay bounded: kinds, results and
// reasons are fixed lists, and schedules are created by operators.
//
// Counters count what this instance did: its requests' holds and
// submissions, its consumer's decisions (a batch delivered again after a
// crash or a lost acknowledgement is counted again). Holds that expire are
// not counted: the hold store ends them by itself.
type metrics struct {
	holds        *prometheus.CounterVec
	holdEnds     *prometheus.CounterVec
	heldSeats    *prometheus.GaugeVec
	reservations *prometheus.CounterVec
	batch        prometheus.Histogram
	batchErrors  prometheus.Counter
}

// Hold kinds and results (usher_holds_total).
const (
	kindSeats = "seats"
	kindStock = "stock"
)

func newMetrics(reg prometheus.Registerer, broker mq.Broker) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		holds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_holds_total",
			Help: "Hold requests by kind (seats, stock) and result: placed, or refused: taken (a seat held or sold), limit (the visitor's hold limit), sold_out (too few stock units).",
		}, []string{"kind", "result"}),
		holdEnds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_hold_ends_total",
			Help: "Holds ended before they expired, by how: released (by the visitor), consumed (its reservation was confirmed), returned (its reservation was rejected).",
		}, []string{"how"}),
		heldSeats: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usher_held_seats",
			Help: "Seats of the schedule under live holds and not sold, as of this instance's last seat map rebuild.",
		}, []string{"schedule"}),
		reservations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_reservations_total",
			Help: "Reservations by outcome: submitted (by this instance's requests), confirmed or rejected (by this instance's consumer); reason: why a rejected one was (seat_taken, seat_unknown, sold_out, buyer_limit, other).",
		}, []string{"outcome", "reason"}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "usher_reservation_batch_seconds",
			Help:    "Duration of one batch decided in SQL (booking.Store.Decide) by this instance's consumer.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		batchErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "usher_reservation_batch_errors_total",
			Help: "Batches the database failed to decide; they are delivered again after the retry delay.",
		}),
	}
	reg.MustRegister(m.holds, m.holdEnds, m.heldSeats, m.reservations, m.batch, m.batchErrors, backlogCollector{broker})
	return m
}

// held counts a hold request that got past validation: placed, or refused
// for one of the reasons a sale expects. Other errors (a store outage)
// show in the HTTP metrics.
func (m *metrics) held(kind string, err error) {
	if m == nil {
		return
	}
	result := ""
	switch {
	case err == nil:
		result = "placed"
	case errors.Is(err, hold.ErrTaken):
		result = "taken"
	case errors.Is(err, hold.ErrLimit), errors.Is(err, ErrBuyerLimit):
		result = "limit"
	case errors.Is(err, hold.ErrSoldOut):
		result = "sold_out"
	default:
		return
	}
	m.holds.WithLabelValues(kind, result).Inc()
}

func (m *metrics) holdEnded(how string) {
	if m != nil {
		m.holdEnds.WithLabelValues(how).Inc()
	}
}

func (m *metrics) seatsHeld(scheduleID int64, n int) {
	if m != nil {
		m.heldSeats.WithLabelValues(strconv.FormatInt(scheduleID, 10)).Set(float64(n))
	}
}

// submitted passes Submit's results through, counting a new reservation.
func (m *metrics) submitted(r booking.Reservation, created bool, err error) (booking.Reservation, bool, error) {
	if m != nil && created && err == nil {
		m.reservations.WithLabelValues("submitted", "").Inc()
	}
	return r, created, err
}

// decided records one Decide call: its duration, and the outcome of every
// reservation when it succeeded.
func (m *metrics) decided(out []booking.Reservation, d time.Duration, err error) {
	if m == nil {
		return
	}
	m.batch.Observe(d.Seconds())
	if err != nil {
		m.batchErrors.Inc()
		return
	}
	for _, r := range out {
		switch r.Status {
		case booking.Confirmed:
			m.reservations.WithLabelValues("confirmed", "").Inc()
		case booking.Rejected:
			m.reservations.WithLabelValues("rejected", rejectReason(r.Reason)).Inc()
		}
	}
}

// rejectReason bounds the reason label to the reasons booking defines.
func rejectReason(reason string) string {
	switch reason {
	case booking.ReasonSeatTaken, booking.ReasonSeatUnknown, booking.ReasonSoldOut, booking.ReasonBuyerLimit:
		return reason
	}
	return "other"
}

// backlogTimeout bounds the broker call a scrape makes.
const backlogTimeout = 2 * time.Second

var (
	backlogDesc = prometheus.NewDesc("usher_reservation_backlog",
		"Reservations submitted and not yet decided, deployment-wide as the broker reports them at scrape time: waiting (not yet handed to a consumer) or in_flight (handed to one, not acknowledged).",
		[]string{"state"}, nil)
	backlogOldestDesc = prometheus.NewDesc("usher_reservation_backlog_oldest_seconds",
		"Age of the oldest reservation not yet decided, at scrape time; 0 when none waits: the consumer's lag.",
		nil, nil)
)

// backlogCollector asks the broker for the consumer's backlog when
// Prometheus scrapes. When the broker does not answer within backlogTimeout
// the scrape goes on without these series (the broker's outage shows as 503
// unavailable on submissions).
type backlogCollector struct{ broker mq.Broker }

func (c backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- backlogDesc
	ch <- backlogOldestDesc
}

func (c backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), backlogTimeout)
	defer cancel()
	bl, err := c.broker.Backlog(ctx)
	if err != nil {
		return
	}
	age := 0.0
	if !bl.Oldest.IsZero() {
		age = max(0, time.Since(bl.Oldest).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(backlogDesc, prometheus.GaugeValue, float64(bl.Waiting), "waiting")
	ch <- prometheus.MustNewConstMetric(backlogDesc, prometheus.GaugeValue, float64(bl.InFlight), "in_flight")
	ch <- prometheus.MustNewConstMetric(backlogOldestDesc, prometheus.GaugeValue, age)
}
