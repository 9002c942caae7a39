package loadgen

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// WriteSVG draws the reports' timelines side by side, one column per
// scenario, on shared scales so that they compare at a glance: origin
// latency percentiles (log scale), visitors waiting and admitted, rates
// (origin throughput, errors, admissions) and the origin pool's utilisation.
func WriteSVG(w io.Writer, reports []*Report) error {
	const (
		panelW, panelH       = 460, 150
		left, right, top, bo = 64, 16, 40, 30
		header               = 28
		colW                 = left + panelW + right
		rowH                 = top + panelH + bo
	)
	type series struct {
		name, color string
		get         func(Tick) (float64, bool)
		queuedOnly  bool
	}
	type row struct {
		title  string
		log    bool
		series []series
		skip   func(*Report) string // why a column has nothing to show
	}
	noRoom := func(rep *Report) string {
		if rep.Scenario != Queued {
			return "no waiting room in this scenario"
		}
		return ""
	}
	rows := []row{
		{title: "Origin latency (ms, log scale)", log: true, series: []series{
			{"p50", "#1b9e77", func(t Tick) (float64, bool) { return t.P50, t.P50 > 0 }, false},
			{"p95", "#d95f02", func(t Tick) (float64, bool) { return t.P95, t.P95 > 0 }, false},
			{"p99", "#7570b3", func(t Tick) (float64, bool) { return t.P99, t.P99 > 0 }, false},
		}},
		{title: "Visitors", skip: noRoom, series: []series{
			{"waiting", "#e7298a", func(t Tick) (float64, bool) { return float64(t.Waiting), true }, false},
			{"admitted, calling the origin", "#66a61e", func(t Tick) (float64, bool) { return float64(t.Active), true }, false},
		}},
		{title: "Rates (per second)", series: []series{
			{"origin successes", "#1f78b4", func(t Tick) (float64, bool) { return t.OriginRate, true }, false},
			{"origin errors", "#e31a1c", func(t Tick) (float64, bool) { return t.OriginErrors, true }, false},
			{"admissions", "#ff7f00", func(t Tick) (float64, bool) { return t.AdmittedRate, true }, true},
			{"admission rate in force", "#a6761d", func(t Tick) (float64, bool) {
				if t.AdmitRate == nil {
					return 0, false
				}
				return *t.AdmitRate, true
			}, true},
		}},
		{title: "Origin pool utilisation (%)", skip: func(rep *Report) string {
			if rep.Origin.Utilization == nil {
				return "the origin exposes no /stats"
			}
			return ""
		}, series: []series{
			{"utilisation", "#444444", func(t Tick) (float64, bool) {
				if t.Utilization == nil {
					return 0, false
				}
				return 100 * *t.Utilization, true
			}, false},
		}},
	}

	var xMax float64
	for _, rep := range reports {
		for _, t := range rep.Timeline {
			xMax = max(xMax, t.T)
		}
	}
	xMax = ceilToStep(max(xMax, 1))

	width, height := colW*max(1, len(reports)), header+rowH*len(rows)+24
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	for c, rep := range reports {
		title := rep.Scenario + ": " + rep.Model + " model"
		if rep.Users > 0 {
			title += fmt.Sprintf(", %d users", rep.Users)
		}
		fmt.Fprintf(&b, `<text x="%d" y="16" font-size="14" font-weight="bold">%s</text>`+"\n", c*colW+left, html.EscapeString(title))
	}
	for ri, rw := range rows {
		// A shared y scale for the row.
		yMin, yMax := math.Inf(1), 0.0
		for _, rep := range reports {
			for _, t := range rep.Timeline {
				for _, s := range rw.series {
					if v, ok := s.get(t); ok {
						yMin, yMax = min(yMin, v), max(yMax, v)
					}
				}
			}
		}
		var lo, hi float64
		if rw.log {
			if yMax <= 0 {
				yMin, yMax = 1, 10
			}
			lo, hi = math.Pow(10, math.Floor(math.Log10(max(yMin, 0.01)))), math.Pow(10, math.Ceil(math.Log10(max(yMax, 0.01))))
			if hi <= lo {
				hi = lo * 10
			}
		} else {
			lo, hi = 0, ceilToStep(max(yMax, 1))
		}
		yOf := func(v float64) float64 {
			f := (v - lo) / (hi - lo)
			if rw.log {
				f = math.Log10(v/lo) / math.Log10(hi/lo)
			}
			return float64(header+ri*rowH+top+panelH) - f*panelH
		}
		for c, rep := range reports {
			x0, y0 := float64(c*colW+left), float64(header+ri*rowH+top)
			xOf := func(t float64) float64 { return x0 + t/xMax*panelW }
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-weight="bold">%s</text>`+"\n", x0, y0-22, html.EscapeString(rw.title))
			fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", x0, y0, panelW, panelH)
			// Grid and labels.
			for _, v := range yTicks(lo, hi, rw.log) {
				y := yOf(v)
				fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/>`, x0, y, x0+panelW, y)
				fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-4, y+4, num(v))
			}
			for _, t := range linearTicks(0, xMax) {
				x := xOf(t)
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%ss</text>`, x, y0+panelH+14, num(t))
			}
			// The origin's phase changes (usher origin --phases).
			for i := 1; i < len(rep.Timeline); i++ {
				if t := rep.Timeline[i]; t.Phase != rep.Timeline[i-1].Phase && t.Phase > 0 {
					x := xOf(rep.Timeline[i-1].T)
					fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#888" stroke-dasharray="4 3"/><text x="%.1f" y="%.0f" fill="#888">phase %d</text>`,
						x, y0, x, y0+panelH, x+3, y0+panelH-4, t.Phase)
				}
			}
			b.WriteString("\n")
			if rw.skip != nil {
				if why := rw.skip(rep); why != "" {
					fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle" fill="#999">%s</text>`+"\n", x0+panelW/2, y0+panelH/2, html.EscapeString(why))
					continue
				}
			}
			// Legend.
			lx := x0 + 4
			for _, s := range rw.series {
				if s.queuedOnly && rep.Scenario != Queued {
					continue
				}
				fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="10" height="3" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`,
					lx, y0-10, s.color, lx+13, y0-6, html.EscapeString(s.name))
				lx += 20 + 6.2*float64(len(s.name))
			}
			b.WriteString("\n")
			for _, s := range rw.series {
				if s.queuedOnly && rep.Scenario != Queued {
					continue
				}
				var pts []string
				flush := func() {
					if len(pts) > 1 {
						fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", s.color, strings.Join(pts, " "))
					}
					pts = pts[:0]
				}
				for _, t := range rep.Timeline {
					v, ok := s.get(t)
					if !ok || (rw.log && v <= 0) {
						flush()
						continue
					}
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(t.T), yOf(min(max(v, lo), hi))))
				}
				flush()
			}
		}
	}
	fmt.Fprintf(&b, `<text x="4" y="%d" fill="#666">usher loadtest · x: seconds since the start · latency: successful calls, from when due</text>`+"\n", height-6)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceCeil rounds x up to 1, 2 or 5 × 10ⁿ.
func niceCeil(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x*(1-1e-9) {
			return m * p
		}
	}
	return x
}

// ceilToStep rounds x up to a multiple of the tick step for [0, x].
func ceilToStep(x float64) float64 {
	step := niceCeil(x / 5)
	return math.Ceil(x/step-1e-9) * step
}

func linearTicks(lo, hi float64) []float64 {
	step := niceCeil((hi - lo) / 5)
	var out []float64
	for v := lo; v <= hi*(1+1e-9); v += step {
		out = append(out, v)
	}
	return out
}

func yTicks(lo, hi float64, log bool) []float64 {
	if !log {
		return linearTicks(lo, hi)
	}
	var out []float64
	for v := lo; v <= hi*(1+1e-9); v *= 10 {
		out = append(out, v)
	}
	return out
}
