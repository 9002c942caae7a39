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
