package capacity

import (
	"encoding/json"
	"time"
)

// MarshalJSON writes durations in milliseconds (…_ms) and seconds (ttl_s).
func (in Input) MarshalJSON() ([]byte, error) {
	type plain Input // drops the method, keeps the tags
	return json.Marshal(struct {
		plain
		ServiceTimeMS float64 `json:"service_time_ms"`
		TTLSeconds    float64 `json:"ttl_s"`
		IntervalMS    float64 `json:"interval_ms,omitempty"`
		BurstTargetMS float64 `json:"burst_target_ms,omitempty"`
	}{plain(in), msOf(in.ServiceTime), in.TTL.Seconds(), msOf(in.Interval), msOf(in.BurstTarget)})
}

// MarshalJSON adds the intervals in milliseconds.
func (p Plan) MarshalJSON() ([]byte, error) {
	type plain Plan
	return json.Marshal(struct {
		plain
		RawIntervalMS     float64 `json:"raw_interval_ms"`
		RoundedIntervalMS float64 `json:"rounded_interval_ms"`
	}{plain(p), msOf(p.RawInterval), msOf(p.RoundedInterval)})
}

// MarshalJSON adds the elapsed time in milliseconds.
func (m Measurement) MarshalJSON() ([]byte, error) {
	type plain Measurement
	return json.Marshal(struct {
		plain
		ElapsedMS float64 `json:"elapsed_ms"`
	}{plain(m), msOf(m.Elapsed)})
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// MarshalJSON writes the arrival time in seconds.
func (in ScaleInput) MarshalJSON() ([]byte, error) {
	type plain ScaleInput
	return json.Marshal(struct {
		plain
		ArriveOverSeconds float64 `json:"arrive_over_s"`
	}{plain(in), in.ArriveOver.Seconds()})
}

// MarshalJSON writes the peak's time and the last admission in seconds.
func (sc Scale) MarshalJSON() ([]byte, error) {
	type plain Scale
	return json.Marshal(struct {
		plain
		PeakAtSeconds       float64 `json:"peak_at_s"`
		LastAdmittedSeconds float64 `json:"last_admitted_s"`
	}{plain(sc), sc.PeakAt.Seconds(), sc.LastAdmitted.Seconds()})
}
