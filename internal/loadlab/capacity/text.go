package capacity

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// WriteText writes the plan for people: the reasoning step by step, a
// summary, and the room configuration with the command that applies it.
// base and room fill the example command.
func (p Plan) WriteText(w io.Writer, base, room string) error {
	var b strings.Builder
	b.WriteString("Capacity plan: Little's law, L = λ × W (seed 002)\n\n")
	width := 0
	for _, s := range p.Steps {
		width = max(width, len([]rune(s.Title)))
	}
	for i, s := range p.Steps {
		fmt.Fprintf(&b, "  %d. %-*s  %s\n", i+1, width, s.Title, s.Detail)
	}
	fmt.Fprintf(&b, "\nTPS %s req/s · max active %s · batch %d · interval %s",
		fmtNum(p.TPS), fmtInt(p.MaxActive), p.Batch, fmtDuration(p.RawInterval))
	if p.RoundedInterval != p.RawInterval {
		fmt.Fprintf(&b, " (seed 002 rounds it to %s)", fmtDuration(p.RoundedInterval))
	}
	b.WriteString("\n")
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	body, err := json.Marshal(p.Room)
	if err != nil {
		return err
	}
	fmt.Fprintf(&b, "\nRoom configuration (usher admits up to %d per step, %s/s on average):\n%s\n\n", p.RoomBatch, fmtNum(*p.Room.AdmitRate), body)
	fmt.Fprintf(&b, "  curl -X PUT -H \"Authorization: Bearer $USHER_ADMIN_KEY\" %s/api/v1/rooms/%s -d '%s'\n", base, room, body)
	_, err = io.WriteString(w, b.String())
	return err
}

// WriteText writes the measurement for people, as seed 002 reads its first
// test: avg and p95, and the throughput Little's law predicts from them.
func (m Measurement) WriteText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "Service time: %d requests to %s at concurrency %d in %s\n"+
		"  avg %s ms, p50 %s ms, p95 %s ms, p99 %s ms, max %s ms; %d errors\n"+
		"  throughput %s req/s; Little's law predicts %d ÷ %s ms (avg) = %s req/s%s\n\n",
		m.Latency.Count, m.URL, m.Concurrency, fmtDuration(m.Elapsed),
		fmtNum(m.Latency.Avg), fmtNum(m.Latency.P50), fmtNum(m.Latency.P95), fmtNum(m.Latency.P99), fmtNum(m.Latency.Max), m.Errors,
		fmtNum(m.Throughput), m.Concurrency, fmtNum(m.Latency.Avg), fmtNum(m.LittleThroughput), m.verdict())
	return err
}

func (m Measurement) verdict() string {
	if m.LittleThroughput == 0 {
		return ""
	}
	if math.Abs(m.Throughput/m.LittleThroughput-1) <= 0.1 {
		return " (agrees: no hidden queueing)"
	}
	return " (disagrees by more than 10 %: the client or the network adds time, or requests queue)"
}

// fmtNum writes x with grouping and at most one decimal (two below 10).
func fmtNum(x float64) string {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	digits := 1
	if math.Abs(x) < 10 {
		digits = 2
	}
	s := strconv.FormatFloat(x, 'f', digits, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	intPart, frac, _ := strings.Cut(s, ".")
	if frac != "" {
		frac = "." + frac
	}
	return group(intPart) + frac
}

func fmtInt(n int64) string { return group(strconv.FormatInt(n, 10)) }

func group(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if len(s) > 4 {
		var b strings.Builder
		for i, r := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(r)
		}
		s = b.String()
	}
	if neg {
		return "-" + s
	}
	return s
}

// fmtSeconds writes seconds with at most three decimals (four below 1 s):
// 0.076 s, 0.0529 s, 180 s.
func fmtSeconds(s float64) string {
	digits := 3
	if s < 1 {
		digits = 4
	}
	t := strings.TrimRight(strings.TrimRight(strconv.FormatFloat(s, 'f', digits, 64), "0"), ".")
	intPart, frac, ok := strings.Cut(t, ".")
	if ok {
		frac = "." + frac
	}
	return group(intPart) + frac + " s"
}

// fmtDuration writes d rounded to a millisecond (a microsecond below 10 ms).
func fmtDuration(d time.Duration) string {
	if d < 10*time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

func fmtPercent(f float64) string { return strconv.FormatFloat(100*f, 'f', 0, 64) + " %" }
