package queue

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

// The limits of a room's settings: Validate enforces them, and the capacity
// planner (internal/loadlab/capacity) plans within them.
const (
	MinMaxActive    = 1
	MaxMaxActive    = 10_000_000
	MinAdmitRate    = 0.001     // visitors per second: one in about 17 minutes
	MaxAdmitRate    = 1_000_000 // visitors per second
	MinInterval     = 10 * time.Millisecond
	MaxInterval     = time.Minute
	MinActiveTTL    = time.Second
	MaxActiveTTL    = 24 * time.Hour
	MinClaimWindow  = time.Second // the most is the room's ActiveTTL
	MaxClientEnters = 1_000_000   // new places per client per minute; 0 is off
	MaxPowBits      = 32
	MaxMaxWaiting   = 100_000_000
	// Near the head a waiting visitor polls every 1.5 to 3 s; a shorter
	// presence timeout would park visitors who are there (which costs
	// them a poll interval, not their place).
	MinPresenceTimeout = 5 * time.Second
	MaxPresenceTimeout = time.Hour
	// VisitorsPerUnit is 0 (off) or in this range; MaxInventory bounds
	// Store.SetInventory (far beyond a sale, exact in Lua's doubles).
	MinVisitorsPerUnit = 0.01
	MaxVisitorsPerUnit = 1000
	MaxInventory       = 1_000_000_000
	// The adaptive controller's limits.
	MaxTargetP95     = time.Minute
	MinControlPeriod = 500 * time.Millisecond
	MaxControlPeriod = 10 * time.Minute
)

// The range of OpensAt (besides zero, no opening).
var (
	MinOpensAt = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxOpensAt = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// A Field is one setting of Settings, listed once in SettingFields: its name
// (the JSON API's name without unit suffix, and the name a store keeps it
// under), its encoding as a string, and its check.
//
// Contract: Decode(s, Encode(x)) sets exactly the field that Encode reads,
// to the value it had in x; Check(s) returns nil or an error wrapping
// ErrInvalid that names the field.
type Field struct {
	Name   string
	Encode func(Settings) string
	Decode func(s *Settings, v string) error
	Check  func(Settings) error
}

// SettingFields lists every field of Settings, in the order Validate checks
// them. Stores that keep settings as named values (redisqueue's hash) encode
// and decode them through this list, so a setting added here reaches every
// store. Durations are encoded as integer nanoseconds, AdmitRate in the
// shortest decimal form that reads back exactly.
//
// To add a plain numeric setting: add the struct field and its default
// (queue.go), one line here, and the JSON field in the API.
func SettingFields() []Field { return settingFields }

// settingFields is built once: stores encode and decode settings on every
// room read (the view refresh reads every room every 100 ms).
var settingFields = []Field{
	{
		Name:   "state",
		Encode: func(s Settings) string { return string(s.State) },
		Decode: func(s *Settings, v string) error { s.State = RoomState(v); return nil },
		Check: func(s Settings) error {
			if s.State != Open && s.State != Paused && !s.State.Refuses() {
				return invalid("state %q: want open, paused, closed or sold_out", s.State)
			}
			return nil
		},
	},
	intField("max_active", func(s *Settings) *int64 { return &s.MaxActive }, MinMaxActive, MaxMaxActive),
	rateField("admit_rate", func(s *Settings) *float64 { return &s.AdmitRate },
		func(Settings) (float64, float64, string) {
			return MinAdmitRate, MaxAdmitRate, strconv.Itoa(MaxAdmitRate)
		}),
	durationField("interval", func(s *Settings) *time.Duration { return &s.Interval },
		func(Settings) (time.Duration, time.Duration, string) { return MinInterval, MaxInterval, "1m" }),
	durationField("active_ttl", func(s *Settings) *time.Duration { return &s.ActiveTTL },
		func(Settings) (time.Duration, time.Duration, string) { return MinActiveTTL, MaxActiveTTL, "24h" }),
	durationField("claim_window", func(s *Settings) *time.Duration { return &s.ClaimWindow },
		func(s Settings) (time.Duration, time.Duration, string) {
			return MinClaimWindow, s.ActiveTTL, "active_ttl"
		}),
	intField("client_enters_per_minute", func(s *Settings) *int64 { return &s.ClientEntersPerMinute }, 0, MaxClientEnters),
	intField("pow_bits", func(s *Settings) *int64 { return &s.PowBits }, 0, MaxPowBits),
	boolField("require_identity", func(s *Settings) *bool { return &s.RequireIdentity }),
	boolField("require_invite", func(s *Settings) *bool { return &s.RequireInvite }),
	intField("max_waiting", func(s *Settings) *int64 { return &s.MaxWaiting }, 0, MaxMaxWaiting),
	{
		Name:   "presence_timeout",
		Encode: func(s Settings) string { return strconv.FormatInt(int64(s.PresenceTimeout), 10) },
		Decode: func(s *Settings, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			s.PresenceTimeout = time.Duration(n)
			return err
		},
		Check: func(s Settings) error {
			if d := s.PresenceTimeout; d != 0 && (d < MinPresenceTimeout || d > MaxPresenceTimeout) {
				return invalid("presence_timeout %v: want 0 (off) or %v to %v", d, MinPresenceTimeout, MaxPresenceTimeout)
			}
			return nil
		},
	},
	{
		Name:   "visitors_per_unit",
		Encode: func(s Settings) string { return strconv.FormatFloat(s.VisitorsPerUnit, 'g', -1, 64) },
		Decode: func(s *Settings, v string) (err error) {
			s.VisitorsPerUnit, err = strconv.ParseFloat(v, 64)
			return err
		},
		Check: func(s Settings) error {
			if v := s.VisitorsPerUnit; v != 0 && !(v >= MinVisitorsPerUnit && v <= MaxVisitorsPerUnit) {
				return invalid("visitors_per_unit %v: want 0 (off) or %v to %v", v, MinVisitorsPerUnit, MaxVisitorsPerUnit)
			}
			return nil
		},
	},
	{
		// Unix milliseconds, "0" when unset: stores compare it with now in
		// milliseconds.
		Name: "opens_at",
		Encode: func(s Settings) string {
			if s.OpensAt.IsZero() {
				return "0"
			}
			return strconv.FormatInt(s.OpensAt.UnixMilli(), 10)
		},
		Decode: func(s *Settings, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			s.OpensAt = time.Time{}
			if n != 0 {
				s.OpensAt = time.UnixMilli(n).UTC()
			}
			return err
		},
		Check: func(s Settings) error {
			t := s.OpensAt
			if !t.IsZero() && (t.Before(MinOpensAt) || !t.Before(MaxOpensAt) || !t.Equal(t.Truncate(time.Millisecond))) {
				return invalid("opens_at %v: want whole milliseconds from %v to %v", t, MinOpensAt.Format(time.RFC3339), MaxOpensAt.Format(time.RFC3339))
			}
			return nil
		},
	},
	{
		Name:   "admission",
		Encode: func(s Settings) string { return string(s.Admission) },
		Decode: func(s *Settings, v string) error { s.Admission = Admission(v); return nil },
		Check: func(s Settings) error {
			if s.Admission != Static && s.Admission != Adaptive {
				return invalid("admission %q: want static or adaptive", s.Admission)
			}
			return nil
		},
	},
	durationField("target_p95", func(s *Settings) *time.Duration { return &s.TargetP95 },
		func(Settings) (time.Duration, time.Duration, string) { return 0, MaxTargetP95, "1m" }),
	rateField("min_admit_rate", func(s *Settings) *float64 { return &s.MinAdmitRate },
		func(Settings) (float64, float64, string) {
			return MinAdmitRate, MaxAdmitRate, strconv.Itoa(MaxAdmitRate)
		}),
	rateField("max_admit_rate", func(s *Settings) *float64 { return &s.MaxAdmitRate },
		func(s Settings) (float64, float64, string) {
			return max(MinAdmitRate, s.MinAdmitRate), MaxAdmitRate, strconv.Itoa(MaxAdmitRate) + ", and at least min_admit_rate"
		}),
	durationField("control_period", func(s *Settings) *time.Duration { return &s.ControlPeriod },
		func(Settings) (time.Duration, time.Duration, string) {
			return MinControlPeriod, MaxControlPeriod, "10m"
		}),
	// Last: its check names the other settings a sharded room cannot
	// have, once each has been checked on its own (shard.go).
	{
		Name:   "shard_strategy",
		Encode: func(s Settings) string { return string(s.ShardStrategy) },
		Decode: func(s *Settings, v string) error { s.ShardStrategy = ShardStrategy(v); return nil },
		Check: func(s Settings) error {
			if !slices.Contains(ShardStrategies, s.ShardStrategy) {
				return invalid("shard_strategy %q: want counter, timestamp or estimate", s.ShardStrategy)
			}
			return nil
		},
	},
	checked(intField("shards", func(s *Settings) *int64 { return &s.Shards }, 1, MaxShards), checkShards),
}

// DecodeSettings reads settings stored by name (SettingFields' names and
// encodings): a setting missing from named (stored before it existed)
// keeps its default. It does not validate.
func DecodeSettings(named map[string]string) (Settings, error) {
	s := DefaultSettings()
	for _, f := range SettingFields() {
		if v, ok := named[f.Name]; ok {
			if err := f.Decode(&s, v); err != nil {
				return Settings{}, fmt.Errorf("setting %s: %w", f.Name, err)
			}
		}
	}
	return s, nil
}

// Validate reports the first setting out of range, wrapped in ErrInvalid.
func (s Settings) Validate() error {
	for _, f := range SettingFields() {
		if err := f.Check(s); err != nil {
			return err
		}
	}
	return nil
}

// invalid is ErrInvalid with a detail the client sees: the field and its
// range.
func invalid(format string, args ...any) error {
	return ErrInvalid.Detail(format, args...)
}

func intField(name string, field func(*Settings) *int64, lo, hi int64) Field {
	return Field{
		Name:   name,
		Encode: func(s Settings) string { return strconv.FormatInt(*field(&s), 10) },
		Decode: func(s *Settings, v string) (err error) {
			*field(s), err = strconv.ParseInt(v, 10, 64)
			return err
		},
		Check: func(s Settings) error {
			if n := *field(&s); n < lo || n > hi {
				return invalid("%s %d: want %d to %d", name, n, lo, hi)
			}
			return nil
		},
	}
}

// checked is f with a further check, run once f's own has passed.
func checked(f Field, more func(Settings) error) Field {
	own := f.Check
	f.Check = func(s Settings) error {
		if err := own(s); err != nil {
			return err
		}
		return more(s)
	}
	return f
}

// rateField is a rate in visitors per second, kept in the shortest decimal
// form that reads back exactly. limits returns the range and how to name
// its upper end.
func rateField(name string, field func(*Settings) *float64, limits func(Settings) (lo, hi float64, hiName string)) Field {
	return Field{
		Name:   name,
		Encode: func(s Settings) string { return strconv.FormatFloat(*field(&s), 'g', -1, 64) },
		Decode: func(s *Settings, v string) (err error) {
			*field(s), err = strconv.ParseFloat(v, 64)
			return err
		},
		Check: func(s Settings) error {
			lo, hi, hiName := limits(s)
			if r := *field(&s); !(r >= lo) || r > hi {
				return invalid("%s %v: want %v to %s per second", name, r, lo, hiName)
			}
			return nil
		},
	}
}

// boolField is a flag kept as "1" or "0".
func boolField(name string, field func(*Settings) *bool) Field {
	return Field{
		Name: name,
		Encode: func(s Settings) string {
			if *field(&s) {
				return "1"
			}
			return "0"
		},
		Decode: func(s *Settings, v string) error {
			b, err := strconv.ParseBool(v)
			*field(s) = b
			return err
		},
		Check: func(Settings) error { return nil },
	}
}

// durationField is a duration kept as integer nanoseconds. limits returns
// the range and how to name its upper end (a constant or another setting).
func durationField(name string, field func(*Settings) *time.Duration,
	limits func(Settings) (lo, hi time.Duration, hiName string)) Field {
	return Field{
		Name:   name,
		Encode: func(s Settings) string { return strconv.FormatInt(int64(*field(&s)), 10) },
		Decode: func(s *Settings, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			*field(s) = time.Duration(n)
			return err
		},
		Check: func(s Settings) error {
			lo, hi, hiName := limits(s)
			if d := *field(&s); d < lo || d > hi {
				return invalid("%s %v: want %v to %s", name, d, lo, hiName)
			}
			return nil
		},
	}
}
