package control

import (
	"strconv"
	"time"
)

// State is a room's controller state, one per room in the store however
// many instances run: every field is listed in Fields.
type State struct {
	// Rate is the admission rate the controller set (admit_rate_current);
	// 0 before its first step.
	Rate float64
	// Baseline is the learned unloaded p95: the least, over the windows
	// so far, of the window's p95 × (1 + 1/√n) for its n samples (the
	// correction offsets the p95's sampling noise, which would drag a
	// plain minimum below the truth); 0 before the first window.
	Baseline time.Duration
	// PerAdmit is the origin samples per admitted visitor, an average
	// over windows within the target: with the samples per second of an
	// overloaded window, the rate the origin keeps up with.
	PerAdmit float64
	// Good is the highest rate that held (two windows within the target)
	// since the origin last changed (0: none known). Steady counts the
	// steps since the rate last changed, Calm the steps at or above Good
	// below the band since the last probe, Backoff the probes that
	// overloaded in a row (the next waits 2^Backoff calm steps), Streak
	// those that held (the next probes twice as far).
	Good                          float64
	Steady, Calm, Backoff, Streak int64
	// Peak is the highest good rate the origin held (0: none).
	Peak float64
	// Limit is the rate at which the origin was last overloaded (0: none
	// since it last changed): increases below it probe, above it grow.
	Limit float64
	// At is the time of the last step (whole milliseconds); zero before
	// the first.
	At time.Time
	// Admitted is the room's admissions in total at the last step.
	Admitted int64
	// Hold counts the steps still to skip after a decrease, so that the
	// next decision sees the decrease's effect.
	Hold int64
	// Resume is the rate to take when a drain ends (0: not draining), and
	// Backlog the visitors the origin holds beyond what it holds unloaded,
	// estimated when the drain began and followed since (admitted less
	// served).
	Resume, Backlog float64
	// Version counts steps; a store keeps a step only over the version it
	// read, so one step per period runs however many instances try.
	Version int64
	// P95 is the p95 of the last step's window (for stats and metrics).
	P95 time.Duration
}

// endDrain ends a drain: back to the rate it resumes at, and a step of
// its own (the next window is verified before anything moves on from it).
func (c *State) endDrain() {
	c.Rate, c.Resume, c.Backlog, c.Hold, c.Steady = c.Resume, 0, 0, 0, 0
}

// A Field is one field of State as stores keep it: by name, as a string.
type Field struct {
	Name   string
	Encode func(State) string
	Decode func(c *State, v string) error
}

// Fields lists every field of State. Stores keep them next to the room's
// settings (redisqueue: in the room's hash); admit_rate_current is what the
// admission step reads.
func Fields() []Field { return fields }

var fields = []Field{
	floatField("admit_rate_current", func(c *State) *float64 { return &c.Rate }),
	intField("ctl_baseline_ns", func(c *State) *int64 { return (*int64)(&c.Baseline) }),
	{"ctl_at_ms",
		func(c State) string {
			if c.At.IsZero() {
				return "0"
			}
			return strconv.FormatInt(c.At.UnixMilli(), 10)
		},
		func(c *State, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			c.At = time.Time{}
			if n != 0 {
				c.At = time.UnixMilli(n).UTC()
			}
			return err
		}},
	intField("ctl_admitted", func(c *State) *int64 { return &c.Admitted }),
	intField("ctl_hold", func(c *State) *int64 { return &c.Hold }),
	floatField("ctl_backlog", func(c *State) *float64 { return &c.Backlog }),
	floatField("ctl_resume", func(c *State) *float64 { return &c.Resume }),
	floatField("ctl_good", func(c *State) *float64 { return &c.Good }),
	intField("ctl_steady", func(c *State) *int64 { return &c.Steady }),
	floatField("ctl_peak", func(c *State) *float64 { return &c.Peak }),
	floatField("ctl_limit", func(c *State) *float64 { return &c.Limit }),
	intField("ctl_backoff", func(c *State) *int64 { return &c.Backoff }),
	intField("ctl_calm", func(c *State) *int64 { return &c.Calm }),
	intField("ctl_streak", func(c *State) *int64 { return &c.Streak }),
	floatField("ctl_per_admit", func(c *State) *float64 { return &c.PerAdmit }),
	intField("ctl_version", func(c *State) *int64 { return &c.Version }),
	intField("ctl_p95_ns", func(c *State) *int64 { return (*int64)(&c.P95) }),
}

func floatField(name string, field func(*State) *float64) Field {
	return Field{name,
		func(c State) string { return strconv.FormatFloat(*field(&c), 'g', -1, 64) },
		func(c *State, v string) (err error) { *field(c), err = strconv.ParseFloat(v, 64); return err }}
}

func intField(name string, field func(*State) *int64) Field {
	return Field{name,
		func(c State) string { return strconv.FormatInt(*field(&c), 10) },
		func(c *State, v string) (err error) { *field(c), err = strconv.ParseInt(v, 10, 64); return err }}
}
