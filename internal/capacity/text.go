package capacity

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"usher/internal/queue/forecast"
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
	roomInterval := p.room.Interval
	fmt.Fprintf(&b, "\nTPS %s req/s · max active %s · batch %d · interval %s in the room",
		fmtNum(p.TPS), fmtInt(p.MaxActive), p.Batch, fmtDuration(roomInterval))
	if p.RawInterval != 0 && p.RawInterval != roomInterval {
		fmt.Fprintf(&b, " (%s exact; seed 002 rounds it to %s)", fmtDuration(p.RawInterval), fmtDuration(p.RoundedInterval))
	}
	b.WriteString("\n")
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	body, err := json.Marshal(p.Room)
	if err != nil {
		return err
	}
	fmt.Fprintf(&b, "\nRoom configuration (usher admits up to %d per step, %s/s on average):\n%s\n\n", p.RoomBatch, fmtNum(p.room.AdmitRate), body)
	// The same commands as the README's walk-through: the admin key from
	// the file usher serve generates.
	b.WriteString("  ADMIN=$(cat data/admin.key)   # the key usher serve generated in --data-dir, or your --admin-key\n")
	fmt.Fprintf(&b, "  curl -X PUT -H \"Authorization: Bearer $ADMIN\" %s/api/v1/rooms/%s -d '%s'\n", base, room, body)
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

// WriteText writes the scale section for people.
func (sc Scale) WriteText(w io.Writer) error {
	var b strings.Builder
	in, u := sc.Input, sc.Input.Units
	fmt.Fprintf(&b, "\nScale: %s visitors arriving over %s (%s enters/s), admitted at %s/s\n\n",
		fmtInt(in.Visitors), fmtDuration(in.ArriveOver), fmtRate(sc.EnterRate), fmtRate(sc.AdmitRate))
	row := func(title, format string, args ...any) {
		fmt.Fprintf(&b, "  %-13s %s\n", title, fmt.Sprintf(format, args...))
	}
	row("peak line", "%s waiting at %s (visitors − admit_rate × arrival time); the last is admitted at %s",
		fmtInt(sc.PeakWaiting), fmtDuration(sc.PeakAt), fmtDuration(sc.LastAdmitted))
	if sc.ActiveBound == "arrivals" {
		row("active", "%s at %s, when the line peaks: all admitted by then (admit_rate × %s, at most the visitors); max_active %s (admit_rate × TTL %s) once a line has been admitted for a whole TTL",
			fmtInt(sc.PeakActive), fmtDuration(sc.PeakAt), fmtDuration(sc.PeakAt), fmtInt(sc.maxActive), fmtDuration(sc.ttl))
	} else {
		row("active", "%s at %s, when the line peaks: the admissions of the last TTL (admit_rate × %s), within max_active %s",
			fmtInt(sc.PeakActive), fmtDuration(sc.PeakAt), fmtDuration(sc.ttl), fmtInt(sc.maxActive))
	}
	row("store memory", "%s waiting (%s × %s B) + %s active (%s × %s B) = %s",
		fmtBytes(sc.WaitingMemory), fmtInt(sc.PeakWaiting), fmtNum(u.WaitingBytes),
		fmtBytes(sc.ActiveMemory), fmtInt(sc.PeakActive), fmtNum(u.ActiveBytes), fmtBytes(sc.WaitingMemory+sc.ActiveMemory))
	row("status polls", "%s/s at the peak: the sum over the line of 1 ÷ its poll interval (%s in the near zone, the first %s places, whose polls reach the store: %s/s; behind it a tenth of the ETA, up to %s), and one poll per admission",
		fmtRate(sc.Polls), fmtDuration(forecast.FastPoll), fmtInt(sc.Near), fmtRate(sc.StorePolls), fmtDuration(forecast.MaxPoll))
	row("enters", "%s/s while the visitors arrive", fmtRate(sc.EnterRate))
	row("store calls", "%s/s: enters, store polls, admission steps, every instance's view refresh (10/s)", fmtRate(sc.StoreOps))
	row("Redis", "%d primar%s at %s calls/s each", sc.Primaries, plural(sc.Primaries, "y", "ies"), fmtRate(u.PrimaryOps))
	row("usher", "%d instance%s at %s polls/s and %s enters/s each", sc.Instances, plural(sc.Instances, "", "s"), fmtRate(u.InstancePolls), fmtRate(u.InstanceEnters))
	row("bandwidth", "%s/s (%s Gbit/s) of poll answers, %s B each", fmtBytes(sc.Bandwidth), fmtNum(sc.Bandwidth*8/1e9), fmtNum(u.PollAnswerBytes))
	for _, n := range sc.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	b.WriteString("Polls/s is the steady figure at the peak line; simulated sales came within 5 % of it in their busiest second (docs/scaling.md).\n")
	b.WriteString("Per-unit figures: measured on a shared 2-vCPU machine (docs/scaling.md); measure yours and pass them (--primary-ops, --instance-polls, …).\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// fmtRate writes a rate a second: whole above 100, else as fmtNum.
func fmtRate(x float64) string {
	if x >= 100 {
		return fmtInt(int64(math.Round(x)))
	}
	return fmtNum(x)
}

// fmtBytes writes n bytes in decimal units: 950 B, 12.6 MB, 1.18 GB.
func fmtBytes(n float64) string {
	for _, u := range []struct {
		size float64
		name string
	}{{1e12, "TB"}, {1e9, "GB"}, {1e6, "MB"}, {1e3, "kB"}} {
		if n >= u.size {
			return fmtNum(n/u.size) + " " + u.name
		}
	}
	return fmtNum(n) + " B"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
