package loadgen

import (
	"fmt"
	"strings"
	"time"

	"usher/internal/hist"
	"usher/internal/loadlab/simorigin"
)

// PhaseReport is what the run showed during one phase of an origin whose
// settings change (usher origin --phases), attributed by tick: a tick
// counts in the phase the origin was in at its end.
type PhaseReport struct {
	Phase    int     `json:"phase"`
	Settings string  `json:"settings"`
	Seconds  float64 `json:"seconds"`
	Conns    int     `json:"conns"`
	// OriginP95MS is the p95 of the successful origin calls that ended in
	// the phase; UnloadedP95MS the origin's service-time p95 (its latency
	// with nothing queued), and P95Ratio the one over the other.
	OriginP95MS   float64 `json:"origin_p95_ms"`
	UnloadedP95MS float64 `json:"unloaded_p95_ms"`
	P95Ratio      float64 `json:"p95_ratio"`
	// Utilization of the origin's connection pool during the phase.
	Utilization float64 `json:"utilization"`
	// OriginRPS are successful origin calls per second, AdmittedPS
	// admissions per second as the generator saw them.
	OriginRPS  float64 `json:"origin_rps"`
	AdmittedPS float64 `json:"admitted_ps"`
	// Settled: the same from PhaseSettle into the phase on (what a
	// controller holds once it followed the change), when the phase is
	// longer.
	SettledP95MS       float64 `json:"settled_p95_ms,omitempty"`
	SettledP95Ratio    float64 `json:"settled_p95_ratio,omitempty"`
	SettledUtilization float64 `json:"settled_utilization,omitempty"`
	SettledAdmittedPS  float64 `json:"settled_admitted_ps,omitempty"`
}

// PhaseSettle is when a phase counts as settled.
const PhaseSettle = 10 * time.Second

// phaseAcc sums the ticks of one phase.
type phaseAcc struct {
	phase          int
	settings       string
	conns          int
	unloaded       float64
	seconds        float64
	lat            *hist.Snapshot
	ok, admitted   int64
	busy, capacity float64
	// the same from PhaseSettle on
	sSeconds, sBusy, sCapacity float64
	sLat                       *hist.Snapshot
	sAdmitted                  int64
}

// addPhase counts a tick of dt seconds, ending in the phase st reports,
// with the calls' latency od, ok successes and adm admissions, and the
// origin's pool use since prev.
func (tl *timeline) addPhase(prev, st simorigin.Stats, dt float64, od *hist.Snapshot, ok, adm int64) {
	if st.Phase == 0 {
		return
	}
	var acc *phaseAcc
	if n := len(tl.phases); n > 0 && tl.phases[n-1].phase == st.Phase {
		acc = tl.phases[n-1]
	} else {
		settings := ""
		if parts := strings.Split(st.Phases, ","); st.Phase <= len(parts) {
			settings = parts[st.Phase-1]
		}
		acc = &phaseAcc{phase: st.Phase, settings: settings, conns: st.Conns, unloaded: st.ServiceP95MS, lat: hist.New(), sLat: hist.New()}
		tl.phases = append(tl.phases, acc)
	}
	acc.seconds += dt
	acc.lat.Merge(od)
	acc.ok += ok
	acc.admitted += adm
	acc.busy += st.ConnBusySeconds - prev.ConnBusySeconds
	acc.capacity += st.ConnCapacitySeconds - prev.ConnCapacitySeconds
	if acc.seconds-dt >= PhaseSettle.Seconds() {
		acc.sSeconds += dt
		acc.sLat.Merge(od)
		acc.sAdmitted += adm
		acc.sBusy += st.ConnBusySeconds - prev.ConnBusySeconds
		acc.sCapacity += st.ConnCapacitySeconds - prev.ConnCapacitySeconds
	}
}

func (tl *timeline) phaseReports() []PhaseReport {
	var out []PhaseReport
	for _, a := range tl.phases {
		p := PhaseReport{Phase: a.phase, Settings: a.settings, Seconds: a.seconds, Conns: a.conns,
			OriginP95MS: ms(a.lat.Quantile(0.95)), UnloadedP95MS: a.unloaded,
			OriginRPS: float64(a.ok) / a.seconds, AdmittedPS: float64(a.admitted) / a.seconds}
		if a.unloaded > 0 {
			p.P95Ratio = p.OriginP95MS / a.unloaded
		}
		if a.capacity > 0 {
			p.Utilization = min(1, a.busy/a.capacity)
		}
		if a.sSeconds > 0 && a.sCapacity > 0 {
			p.SettledP95MS = ms(a.sLat.Quantile(0.95))
			p.SettledUtilization = min(1, a.sBusy/a.sCapacity)
			p.SettledAdmittedPS = float64(a.sAdmitted) / a.sSeconds
			if a.unloaded > 0 {
				p.SettledP95Ratio = p.SettledP95MS / a.unloaded
			}
		}
		out = append(out, p)
	}
	return out
}

// writePhases writes the phase table of a report.
func writePhases(b *strings.Builder, phases []PhaseReport) {
	if len(phases) == 0 {
		return
	}
	fmt.Fprintf(b, "  origin phases (ticks attributed to the phase at their end):\n")
	fmt.Fprintf(b, "    %-5s %-28s %6s %9s %9s %7s %6s %10s %11s   %s\n", "phase", "settings", "secs", "p95 ms", "unloaded", "ratio", "util", "origin/s", "admitted/s",
		"settled ("+PhaseSettle.String()+" on): ratio, util, admitted/s")
	for _, p := range phases {
		fmt.Fprintf(b, "    %-5d %-28s %6.1f %9s %9s %6.2f× %5.0f%% %10s %11s", p.Phase, p.Settings, p.Seconds,
			num(p.OriginP95MS), num(p.UnloadedP95MS), p.P95Ratio, 100*p.Utilization, num(p.OriginRPS), num(p.AdmittedPS))
		if p.SettledP95MS > 0 {
			fmt.Fprintf(b, "   %.2f×, %.0f%%, %s", p.SettledP95Ratio, 100*p.SettledUtilization, num(p.SettledAdmittedPS))
		}
		b.WriteString("\n")
	}
}
