package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"usher/internal/fault"
)

// The limits of a room's settings: Validate enforces them, and the capacity
// planner (internal/capacity) plans within them.
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
	// PriorityShare is 0 (no lane) or from this to 1.
	MinPriorityShare = 0.01
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

// A Field is one setting of Settings, declared once in SettingFields: how
// a store keeps it (Name, Encode, Decode), its check, and how the API and
// the console show it (JSON, Type, Unit, Help, Min, Max, Enum, Get, Set).
//
// Contract: Decode(s, Encode(x)) and Set(s, JSON(Get(x))) each set exactly
// the field that Encode and Get read, to the value it had in x; Check(s)
// returns nil or an error wrapping ErrInvalid that names the field.
type Field struct {
	// Name is the store's name; JSON the API's, with its unit
	// (interval_ms), which Unit spells for people ("ms").
	Name, JSON, Unit string
	// Help is one line for the console and the API schema.
	Help string
	// Type is the JSON Schema type: integer, number, boolean or string;
	// Enum lists a string setting's values; Format is a string's format
	// (date-time).
	Type, Format string
	Enum         []string
	// Min and Max are the widest range the API accepts, in JSON units, for
	// a number (Ranged); Check may narrow it by another setting.
	Min, Max float64
	// Fixed settings are chosen when the room is made.
	Fixed  bool
	Encode func(Settings) string
	Decode func(s *Settings, v string) error
	Check  func(Settings) error
	// Get returns the API's value, omit when the answer leaves it out; Set
	// reads one from a request (null is no change), saturating instead of
	// overflowing so that Check refuses what is out of range.
	Get func(Settings) (v any, omit bool)
	Set func(s *Settings, raw json.RawMessage) error
}

// Ranged reports whether f is a number, with a range (Min, Max).
func (f Field) Ranged() bool { return f.Type == "integer" || f.Type == "number" }

// SettingFields lists every field of Settings, in the order Validate checks
// them and the API lists them. Stores that keep settings as named values
// (redisqueue's hash, memqueue's file) encode and decode them through this
// list, the API applies and answers through it, and the console builds its
// form from it, so adding a setting is a row here and its behaviour.
// Durations are kept as integer nanoseconds, rates in the shortest decimal
// form that reads back exactly.
func SettingFields() []Field { return settingFields }

// LookupField returns the field whose JSON name is name.
func LookupField(name string) (Field, bool) {
	for _, f := range settingFields {
		if f.JSON == name {
			return f, true
		}
	}
	return Field{}, false
}

// settingFields is built once: stores encode and decode settings on every
// room read (the view refresh reads every room every 100 ms).
var settingFields = []Field{
	enumField("state", "open admits, paused queues without admitting, closed and sold_out refuse entries",
		func(s *Settings) *string { return (*string)(&s.State) }, string(Open), string(Paused), string(Closed), string(SoldOut)),
	intField("max_active", "visitors holding a slot at once", func(s *Settings) *int64 { return &s.MaxActive }, MinMaxActive, MaxMaxActive),
	rateField("admit_rate", "admissions a second (static admission)", func(s *Settings) *float64 { return &s.AdmitRate },
		func(Settings) float64 { return MinAdmitRate }, ""),
	durationField("interval", time.Millisecond, "time between admission steps", func(s *Settings) *time.Duration { return &s.Interval },
		MinInterval, MaxInterval, nil),
	durationField("active_ttl", time.Second, "how long a slot lasts without a request", func(s *Settings) *time.Duration { return &s.ActiveTTL },
		MinActiveTTL, MaxActiveTTL, nil),
	durationField("claim_window", time.Second, "time an admitted visitor has to come and claim the slot",
		func(s *Settings) *time.Duration { return &s.ClaimWindow }, MinClaimWindow, MaxActiveTTL,
		func(s Settings) (time.Duration, string) { return s.ActiveTTL, "active_ttl" }),
	intField("client_enters_per_minute", "new places one client may take a minute (0: no limit)",
		func(s *Settings) *int64 { return &s.ClientEntersPerMinute }, 0, MaxClientEnters),
	intField("pow_bits", "proof of work an anonymous entry brings, in bits (0: off)", func(s *Settings) *int64 { return &s.PowBits }, 0, MaxPowBits),
	boolField("require_identity", "only visitors with a signed identity assertion enter (one place per account)",
		func(s *Settings) *bool { return &s.RequireIdentity }),
	boolField("require_invite", "only visitors with an invite code of the room enter (a presale)", func(s *Settings) *bool { return &s.RequireInvite }),
	intField("max_waiting", "longest line; entries past it get 429 queue_full (0: no cap)", func(s *Settings) *int64 { return &s.MaxWaiting }, 0, MaxMaxWaiting),
	offOrRange(durationField("presence_timeout", time.Second, "waiting visitors near the front unseen this long are passed over (0: off)",
		func(s *Settings) *time.Duration { return &s.PresenceTimeout }, MinPresenceTimeout, MaxPresenceTimeout, nil),
		func(s Settings) bool { return s.PresenceTimeout == 0 }),
	offOrRange(numberField("visitors_per_unit", "admitted visitors per unit of inventory left (0: no cap)", "",
		func(s *Settings) *float64 { return &s.VisitorsPerUnit }, func(Settings) float64 { return MinVisitorsPerUnit }, MaxVisitorsPerUnit, ""),
		func(s Settings) bool { return s.VisitorsPerUnit == 0 }),
	opensAtField,
	enumField("admission", "static admits at admit_rate; adaptive follows the origin's latency",
		func(s *Settings) *string { return (*string)(&s.Admission) }, string(Static), string(Adaptive)),
	durationField("target_p95", time.Millisecond, "origin p95 an adaptive room holds (0: 1.5 × the unloaded p95 it learns)",
		func(s *Settings) *time.Duration { return &s.TargetP95 }, 0, MaxTargetP95, nil),
	rateField("min_admit_rate", "lowest adaptive rate", func(s *Settings) *float64 { return &s.MinAdmitRate },
		func(Settings) float64 { return MinAdmitRate }, ""),
	rateField("max_admit_rate", "highest adaptive rate", func(s *Settings) *float64 { return &s.MaxAdmitRate },
		func(s Settings) float64 { return max(MinAdmitRate, s.MinAdmitRate) }, ", and at least min_admit_rate"),
	durationField("control_period", time.Millisecond, "how often the adaptive controller steps",
		func(s *Settings) *time.Duration { return &s.ControlPeriod }, MinControlPeriod, MaxControlPeriod, nil),
	offOrRange(numberField("priority_share", "part of each step's admissions for the priority lane (0: no lane)", "",
		func(s *Settings) *float64 { return &s.PriorityShare }, func(Settings) float64 { return MinPriorityShare }, 1, ""),
		func(s Settings) bool { return s.PriorityShare == 0 }),
	enumField("queueing", "how newcomers are taken: fifo in arrival order, random by lottery in draw windows, passthrough at once, reject not at all",
		func(s *Settings) *string { return (*string)(&s.Queueing) }, string(QueueFIFO), string(QueueRandom), string(QueuePassthrough), string(QueueReject)),
	durationField("draw_window", time.Second, "a random room's lottery window: each window's entrants are drawn among themselves",
		func(s *Settings) *time.Duration { return &s.DrawWindow }, MinDrawWindow, MaxDrawWindow, nil),
	fixed(enumField("shard_strategy", "how a sharded room orders its line across shards",
		func(s *Settings) *string { return (*string)(&s.ShardStrategy) }, strategyNames()...)),
	fixed(intField("shards", "Redis shards the room's line spreads over", func(s *Settings) *int64 { return &s.Shards }, 1, MaxShards)),
}

// opensAtField is the opening of a sale with a pre-queue and a fair draw:
// kept in Unix milliseconds ("0" when unset, which stores compare with now
// in milliseconds); in the API RFC 3339, "" for none, omitted when unset.
var opensAtField = Field{
	Name: "opens_at", JSON: "opens_at", Type: "string", Format: "date-time",
	Help: "opening of the sale, with a pre-queue and a fair draw (RFC 3339; empty: none)",
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
	Get: func(s Settings) (any, bool) {
		if s.OpensAt.IsZero() {
			return nil, true
		}
		return s.OpensAt.UTC().Format(time.RFC3339Nano), false
	},
	Set: func(s *Settings, raw json.RawMessage) error {
		var v *string
		if err := json.Unmarshal(raw, &v); err != nil {
			return invalid("opens_at: want a string")
		}
		if v == nil {
			return nil
		}
		s.OpensAt = time.Time{}
		if *v != "" {
			t, err := time.Parse(time.RFC3339Nano, *v)
			if err != nil {
				return invalid("opens_at: want an RFC 3339 time such as 2026-12-24T10:00:00+09:00, or \"\" for none")
			}
			s.OpensAt = t.UTC().Truncate(time.Millisecond)
		}
		return nil
	},
}

func strategyNames() []string {
	names := make([]string, len(ShardStrategies))
	for i, st := range ShardStrategies {
		names[i] = string(st)
	}
	return names
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

// setJSON is Set for a field of JSON type T: null is no change, a value of
// another type an error naming the field.
func setJSON[T any](name, want string, set func(*Settings, T)) func(*Settings, json.RawMessage) error {
	return func(s *Settings, raw json.RawMessage) error {
		var v *T
		if err := json.Unmarshal(raw, &v); err != nil {
			return invalid("%s: want %s", name, want)
		}
		if v != nil {
			set(s, *v)
		}
		return nil
	}
}

func intField(name, help string, field func(*Settings) *int64, lo, hi int64) Field {
	return Field{
		Name: name, JSON: name, Help: help, Type: "integer", Min: float64(lo), Max: float64(hi),
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
		Get: func(s Settings) (any, bool) { return *field(&s), false },
		Set: setJSON(name, "an integer", func(s *Settings, v int64) { *field(s) = v }),
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

// fixed marks f as chosen when the room is made.
func fixed(f Field) Field {
	f.Fixed = true
	return f
}

// offOrRange is f whose value 0 (off) is allowed besides its range; off
// reports it. Its Min becomes 0.
func offOrRange(f Field, off func(Settings) bool) Field {
	own := f.Check
	f.Check = func(s Settings) error {
		if off(s) {
			return nil
		}
		err := own(s)
		if e, ok := errors.AsType[*fault.Error](err); ok {
			return ErrInvalid.Detail("%s", strings.Replace(e.Message, ": want ", ": want 0 (off) or ", 1))
		}
		return err
	}
	f.Min = 0
	return f
}

// rateField is a rate in visitors a second, up to MaxAdmitRate (numberField).
func rateField(name, help string, field func(*Settings) *float64, lo func(Settings) float64, hiMore string) Field {
	return numberField(name, help, "/s", field, lo, MaxAdmitRate, hiMore)
}

// numberField is a number kept in the shortest decimal form that reads
// back exactly, from lo (for settings s) to hi; hiMore says what else
// bounds it.
func numberField(name, help, unit string, field func(*Settings) *float64, lo func(Settings) float64, hi float64, hiMore string) Field {
	top := strconv.FormatFloat(hi, 'f', -1, 64)
	if unit == "/s" {
		top += " per second"
	}
	return Field{
		Name: name, JSON: name, Help: help, Type: "number", Unit: unit, Min: lo(Settings{}), Max: hi,
		Encode: func(s Settings) string { return strconv.FormatFloat(*field(&s), 'g', -1, 64) },
		Decode: func(s *Settings, v string) (err error) {
			*field(s), err = strconv.ParseFloat(v, 64)
			return err
		},
		Check: func(s Settings) error {
			if r := *field(&s); !(r >= lo(s)) || r > hi {
				return invalid("%s %v: want %v to %s%s", name, r, lo(s), top, hiMore)
			}
			return nil
		},
		Get: func(s Settings) (any, bool) { return *field(&s), false },
		Set: setJSON(name, "a number", func(s *Settings, v float64) { *field(s) = v }),
	}
}

// boolField is a flag kept as "1" or "0".
func boolField(name, help string, field func(*Settings) *bool) Field {
	return Field{
		Name: name, JSON: name, Help: help, Type: "boolean",
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
		Get:   func(s Settings) (any, bool) { return *field(&s), false },
		Set:   setJSON(name, "true or false", func(s *Settings, v bool) { *field(s) = v }),
	}
}

// enumField is a string setting that takes one of values.
func enumField(name, help string, field func(*Settings) *string, values ...string) Field {
	want := strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
	return Field{
		Name: name, JSON: name, Help: help, Type: "string", Enum: values,
		Encode: func(s Settings) string { return *field(&s) },
		Decode: func(s *Settings, v string) error { *field(s) = v; return nil },
		Check: func(s Settings) error {
			if !slices.Contains(values, *field(&s)) {
				return invalid("%s %q: want %s", name, *field(&s), want)
			}
			return nil
		},
		Get: func(s Settings) (any, bool) { return *field(&s), false },
		Set: setJSON(name, "a string", func(s *Settings, v string) { *field(s) = v }),
	}
}

// durationField is a duration kept as integer nanoseconds and shown in
// unit (whole milliseconds, or seconds as a number), from lo to hi; upTo,
// when set, narrows hi by another setting, which it names.
func durationField(name string, unit time.Duration, help string, field func(*Settings) *time.Duration,
	lo, hi time.Duration, upTo func(Settings) (time.Duration, string)) Field {
	f := Field{
		Name: name, Help: help,
		Encode: func(s Settings) string { return strconv.FormatInt(int64(*field(&s)), 10) },
		Decode: func(s *Settings, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			*field(s) = time.Duration(n)
			return err
		},
		Check: func(s Settings) error {
			top, topName := hi, fmtDuration(hi)
			if upTo != nil {
				top, topName = upTo(s)
			}
			if d := *field(&s); d < lo || d > top {
				return invalid("%s %v: want %v to %s", name, d, lo, topName)
			}
			return nil
		},
	}
	if unit == time.Millisecond {
		f.JSON, f.Unit, f.Type = name+"_ms", "ms", "integer"
		f.Min, f.Max = float64(lo.Milliseconds()), float64(hi.Milliseconds())
		f.Get = func(s Settings) (any, bool) { return field(&s).Milliseconds(), false }
		f.Set = setJSON(f.JSON, "an integer", func(s *Settings, n int64) { *field(s) = scaled(float64(n), time.Millisecond) })
	} else {
		f.JSON, f.Unit, f.Type = name+"_seconds", "s", "number"
		f.Min, f.Max = lo.Seconds(), hi.Seconds()
		f.Get = func(s Settings) (any, bool) { return field(&s).Seconds(), false }
		f.Set = setJSON(f.JSON, "a number", func(s *Settings, v float64) { *field(s) = scaled(v, time.Second) })
	}
	return f
}

// scaled is v units, saturating instead of overflowing (Check refuses
// it): 18446744073720 ms must not wrap to a valid interval.
func scaled(v float64, unit time.Duration) time.Duration {
	d := v * float64(unit)
	if !(d > -1<<62 && d < 1<<62) {
		return 1 << 62
	}
	return time.Duration(d)
}

// fmtDuration names a limit as the errors always have: 1m, 24h.
func fmtDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return d.String()
}
