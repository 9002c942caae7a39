package console

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"usher/internal/capacity"
	"usher/internal/queue"
)

// WhatIf is the answer of GET /console/whatif: what a rate, an active set
// and a session time mean for the visitors waiting now, by `usher plan`'s
// arithmetic (Little's law, L = λ × W, package capacity).
type WhatIf struct {
	Waiting int64 `json:"waiting"`
	// SustainedRate is what max_active sustains when each admitted visitor
	// stays the session time: λ = L ÷ W.
	SustainedRate float64 `json:"sustained_rate"`
	// PacedRate is what actually paces the line: the lower of the rate and
	// the sustained rate.
	PacedRate float64 `json:"paced_rate"`
	// LastWaitSeconds is how long the last of the waiting visitors waits at
	// the paced rate, if nobody leaves and nobody new comes; absent when
	// nobody is admitted (a rate of 0).
	LastWaitSeconds *float64 `json:"last_wait_seconds,omitempty"`
	// NeededMaxActive is the active set the rate needs with this session
	// time: L = λ × W.
	NeededMaxActive int64    `json:"needed_max_active"`
	Lines           []string `json:"lines"`
}

// whatIf reads waiting, admit_rate, max_active, session_seconds and
// interval_ms (optional) from the query.
func (k *Console) whatIf() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		num := func(name string, lo, hi float64) (float64, error) {
			f, err := strconv.ParseFloat(q.Get(name), 64)
			if err != nil || !(f >= lo && f <= hi) {
				return 0, queue.ErrInvalid.Detail("%s %q: want a number from %v to %v", name, q.Get(name), lo, hi)
			}
			return f, nil
		}
		var in [4]float64
		var err error
		for i, p := range []struct {
			name   string
			lo, hi float64
		}{
			{"waiting", 0, 1e9},
			{"admit_rate", 0, queue.MaxAdmitRate},
			{"max_active", 1, queue.MaxMaxActive},
			{"session_seconds", queue.MinActiveTTL.Seconds(), queue.MaxActiveTTL.Seconds()},
		} {
			if in[i], err = num(p.name, p.lo, p.hi); err != nil {
				k.errs.Write(w, r, err)
				return
			}
		}
		out, err := whatIf(int64(in[0]), in[1], int64(in[2]), time.Duration(in[3]*float64(time.Second)))
		if err != nil {
			k.errs.Write(w, r, queue.ErrInvalid.Detail("%v", err))
			return
		}
		encode(w, http.StatusOK, out)
	})
}

// whatIf computes the forecast. The active set is planned like seed 002's
// connection pool: max_active slots, each held for the session time,
// sustain max_active ÷ session visitors a second (capacity.Make's λ = L ÷
// W, with no margin).
func whatIf(waiting int64, rate float64, maxActive int64, session time.Duration) (WhatIf, error) {
	p, err := capacity.Make(capacity.Input{
		Pool: int(min(maxActive, math.MaxInt32)), ServiceTime: session, Margin: 1, TTL: session,
		Interval: time.Second, RequestsPerVisitor: 1,
	})
	if err != nil {
		return WhatIf{}, err
	}
	out := WhatIf{Waiting: waiting, SustainedRate: p.RawTPS}
	out.PacedRate = min(rate, out.SustainedRate)
	out.NeededMaxActive = int64(math.Ceil(rate*session.Seconds() - 1e-9))
	sess := human(session.Seconds())
	switch {
	case waiting == 0:
		zero := 0.0
		out.LastWaitSeconds = &zero
		out.Lines = append(out.Lines, "Nobody is waiting now.")
	case out.PacedRate <= 0:
		out.Lines = append(out.Lines, fmt.Sprintf("At %s nobody is admitted: the %s waiting visitors wait until the rate is raised.", perTime(rate), group(waiting)))
	default:
		last := float64(waiting) / out.PacedRate
		out.LastWaitSeconds = &last
		out.Lines = append(out.Lines, fmt.Sprintf("At %s the last of the %s waiting visitors waits about %s (%s ÷ %s), if nobody leaves and nobody new comes.",
			perTime(out.PacedRate), group(waiting), human(last), group(waiting), perTime(out.PacedRate)))
	}
	out.Lines = append(out.Lines, fmt.Sprintf("max_active %s with %s sessions sustains λ = L ÷ W = %s ÷ %s = %s visitors.",
		group(maxActive), sess, group(maxActive), sess, perTime(out.SustainedRate)))
	switch {
	case rate > out.SustainedRate*(1+1e-9):
		out.Lines = append(out.Lines, fmt.Sprintf("The active set, not the rate, sets the pace: %s needs max_active L = λ × W = %s × %s = %s.",
			perTime(rate), perTime(rate), sess, group(out.NeededMaxActive)))
	case rate > 0:
		out.Lines = append(out.Lines, fmt.Sprintf("%s with %s sessions fills L = λ × W = %s of the %s slots.",
			perTime(rate), sess, group(out.NeededMaxActive), group(maxActive)))
	}
	return out, nil
}

// perTime writes a rate of x a second with its unit: per second from
// 0.1/s, else per minute, else per hour, so that no rate the what-if
// works with reads as 0.00.
func perTime(x float64) string {
	switch {
	case x == 0 || x >= 0.1:
		return num(x) + "/s"
	case x*60 >= 0.1:
		return num(x*60) + "/min"
	}
	return num(x*3600) + "/h"
}

// num formats a rate: whole numbers plainly, others to 2 decimals.
func num(x float64) string {
	if x == math.Trunc(x) && math.Abs(x) < 1e15 {
		return group(int64(x))
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

// group writes n with thousands separators: 100000 → 100,000.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var b []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	if neg {
		return "-" + string(b)
	}
	return string(b)
}

// human writes seconds as "45 s", "12 min 30 s", "3 h 20 min".
func human(s float64) string {
	switch d := time.Duration(math.Round(s)) * time.Second; {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		if sec := int(d.Seconds()) % 60; sec != 0 {
			return fmt.Sprintf("%d min %d s", int(d.Minutes()), sec)
		}
		return fmt.Sprintf("%d min", int(d.Minutes()))
	default:
		if m := int(d.Minutes()) % 60; m != 0 {
			return fmt.Sprintf("%d h %d min", int(d.Hours()), m)
		}
		return fmt.Sprintf("%d h", int(d.Hours()))
	}
}
