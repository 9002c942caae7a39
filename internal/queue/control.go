package queue

import (
	"time"

	"usher/internal/queue/control"
)

// Admission says who sets a room's admission rate.
type Admission string

const (
	// Static rooms admit at the configured AdmitRate.
	Static Admission = "static"
	// Adaptive rooms admit at the rate their controller sets (Control.Rate),
	// following the origin's latency.
	Adaptive Admission = "adaptive"
)

// The adaptive controller (package control) as the queue and its stores
// name it.
type (
	// Control is a room's controller state, one per room in the store
	// however many instances run: every field is listed in ControlFields.
	Control = control.State
	// Window is what a controller step decides on.
	Window = control.Window
	// Signals are origin latency samples and errors, pooled per room in
	// the store between controller steps.
	Signals = control.Signals
	// A ControlField is one field of Control as stores keep it: by name,
	// as a string.
	ControlField = control.Field
)

// MinSamples is the fewest latency samples a controller step decides on.
const MinSamples = control.MinSamples

// MaxSignalLatency is the longest latency a report may carry.
const MaxSignalLatency = time.Hour

// ControlFields lists every field of Control. Stores keep them next to the
// settings (redisqueue: in the room's hash); admit_rate_current is what the
// admission step reads.
func ControlFields() []ControlField { return control.Fields() }

// controlParams is what the controller reads of s.
func (s Settings) controlParams() control.Params {
	return control.Params{
		Static:       s.Admission != Adaptive,
		AdmitRate:    s.AdmitRate,
		MinAdmitRate: s.MinAdmitRate,
		MaxAdmitRate: s.MaxAdmitRate,
		TargetP95:    s.TargetP95,
		Period:       s.ControlPeriod,
	}
}

// CurrentRate is the admission rate in force: AdmitRate for a static room;
// for an adaptive one the controller's rate, or AdmitRate before its first
// step, within MinAdmitRate and MaxAdmitRate. Stores refill their token
// bucket at it (Limits).
func (s Settings) CurrentRate(c Control) float64 { return control.Rate(s.controlParams(), c) }

// Current returns s with AdmitRate set to CurrentRate(c): the settings the
// admission step follows (Batch, BucketCapacity).
func (s Settings) Current(c Control) Settings {
	s.AdmitRate = s.CurrentRate(c)
	return s
}

// Target is the p95 the controller holds: TargetP95, else a multiple of
// the learned unloaded p95 (0 while unknown).
func (s Settings) Target(c Control) time.Duration { return control.Target(s.controlParams(), c) }

// ControlDue reports whether a controller step is due at now.
func (s Settings) ControlDue(c Control, now time.Time) bool {
	return control.Due(s.controlParams(), c, now)
}

// Step runs one controller step at now (call it when ControlDue): see
// control.Step.
func (s Settings) Step(c Control, w Window, now time.Time) (Control, bool) {
	return control.Step(s.controlParams(), c, w, now)
}
