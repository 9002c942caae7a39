package simorigin

import (
	"strings"
	"time"

	"usher/internal/hist"
)

// Stats are the origin's counters, served as JSON by GET /stats. Counters
// and ConnBusySeconds only grow, so a client reads utilisation over its own
// window as ΔConnBusySeconds ÷ (Conns × ΔUptimeSeconds) (see Utilization).
type Stats struct {
	Workers     int    `json:"workers"`
	Conns       int    `json:"conns"`
	ServiceDist string `json:"service_dist"`
	// ServiceP95MS is the distribution's own p95: the unloaded service time.
	ServiceP95MS float64 `json:"service_p95_ms"`
	TimeoutMS    float64 `json:"timeout_ms"`

	// Gauges.
	InFlight         int64 `json:"in_flight"`
	BusyWorkers      int64 `json:"busy_workers"`
	BusyConns        int64 `json:"busy_conns"`
	WaitingForWorker int64 `json:"waiting_for_worker"`
	WaitingForConn   int64 `json:"waiting_for_conn"`
	// PeakBusyConns is the most connections ever held at once.
	PeakBusyConns int64 `json:"peak_busy_conns"`

	// Counters.
	Served   int64 `json:"served"`
	Rejected int64 `json:"rejected"`
	TimedOut int64 `json:"timed_out"`
	// Queued counts served requests that had to wait for a connection.
	Queued int64 `json:"queued"`

	UptimeSeconds   float64 `json:"uptime_seconds"`
	ConnBusySeconds float64 `json:"conn_busy_seconds"`
	// ConnCapacitySeconds is the pool's size summed over time: Conns ×
	// UptimeSeconds unless phases changed the pool.
	ConnCapacitySeconds float64 `json:"conn_capacity_seconds"`
	// Utilization is ConnBusySeconds ÷ ConnCapacitySeconds, since start.
	Utilization float64 `json:"utilization"`
	// Phase is the phase running (1-based; 0 before the first request or
	// without phases), Phases the whole schedule.
	Phase  int    `json:"phase"`
	Phases string `json:"phases,omitempty"`

	// Wait is the time from arrival to holding a connection; Service the
	// time a connection was held. Latency ≈ Wait + Service.
	Wait    hist.Summary `json:"wait"`
	Service hist.Summary `json:"service"`
}

// Stats reads the counters.
func (o *Origin) Stats() Stats {
	now := time.Now()
	up := now.Sub(o.start).Seconds()
	busy := time.Duration(o.connBusy.Load()).Seconds()
	capSecs, phase, workers, conns := o.phases.capacity(now)
	service := *o.service.Load()
	phases := make([]string, len(o.cfg.Phases))
	for i, ph := range o.cfg.Phases {
		phases[i] = ph.String()
	}
	return Stats{
		Workers: workers, Conns: conns,
		ServiceDist: service.String(), ServiceP95MS: ms(service.Quantile(0.95)),
		TimeoutMS:           ms(time.Duration(o.timeout.Load())),
		ConnCapacitySeconds: capSecs,
		Phase:               phase,
		Phases:              strings.Join(phases, ","),
		InFlight:            o.inFlight.Load(),
		BusyWorkers:         o.busyWorkers.Load(),
		BusyConns:           o.busyConns.Load(),
		WaitingForWorker:    o.waitingWorker.Load(),
		WaitingForConn:      o.waitingConn.Load(),
		PeakBusyConns:       o.peakBusyConns.Load(),
		Served:              o.served.Load(),
		Rejected:            o.rejected.Load(),
		TimedOut:            o.timedOut.Load(),
		Queued:              o.queued.Load(),
		UptimeSeconds:       up,
		ConnBusySeconds:     busy,
		Utilization:         Utilization(Stats{}, Stats{Conns: conns, UptimeSeconds: up, ConnBusySeconds: busy, ConnCapacitySeconds: capSecs}),
		Wait:                o.wait.Snapshot().Summary(),
		Service:             o.serviceHist.Snapshot().Summary(),
	}
}

// Utilization is the share of the connection pool held between two reads
// of the same origin's stats, from 0 to 1 (over the pool's capacity in the
// window, which phases may change).
func Utilization(before, after Stats) float64 {
	capacity := after.ConnCapacitySeconds - before.ConnCapacitySeconds
	if after.ConnCapacitySeconds == 0 { // an origin without the field
		capacity = float64(after.Conns) * (after.UptimeSeconds - before.UptimeSeconds)
	}
	if capacity <= 0 {
		return 0
	}
	return min(1, max(0, (after.ConnBusySeconds-before.ConnBusySeconds)/capacity))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
