package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// RoomSettings are a room's settings by their JSON names, in order: the
// body of PUT /api/v1/rooms/{room} (omitted settings keep their value, or
// the default) and the settings of its answer (every one; opens_at only
// when set). The server's table (queue.SettingFields, served at GET
// /api/v1/settings) names them, their types, units and limits; the wire
// does not list them one by one.
type RoomSettings []Setting

// Setting is one setting and its JSON value.
type Setting struct {
	Name  string
	Value json.RawMessage
}

// Get decodes the setting name into v; false when it is absent.
func (rs RoomSettings) Get(name string, v any) (bool, error) {
	for _, s := range rs {
		if s.Name == name {
			return true, json.Unmarshal(s.Value, v)
		}
	}
	return false, nil
}

// With returns rs with name set to v (replaced where present, else added).
func (rs RoomSettings) With(name string, v any) RoomSettings {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("wire: setting %s: %v", name, err)) // a caller's type that JSON cannot encode
	}
	for i, s := range rs {
		if s.Name == name {
			out := append(RoomSettings(nil), rs...)
			out[i].Value = raw
			return out
		}
	}
	return append(rs[:len(rs):len(rs)], Setting{name, raw})
}

// MarshalJSON writes the settings as one object, in order.
func (rs RoomSettings) MarshalJSON() ([]byte, error) {
	return rs.appendMembers(append([]byte(nil), '{'), true), nil
}

// appendMembers appends the members "name":value, separated by commas
// (first: no comma before the first), and, when first, the closing brace.
func (rs RoomSettings) appendMembers(b []byte, close bool) []byte {
	for i, s := range rs {
		if i > 0 || !close {
			b = append(b, ',')
		}
		name, _ := json.Marshal(s.Name)
		b = append(append(append(b, name...), ':'), s.Value...)
	}
	if close {
		b = append(b, '}')
	}
	return b
}

// UnmarshalJSON reads an object's members in order; a name given twice is
// an error.
func (rs *RoomSettings) UnmarshalJSON(b []byte) error {
	out, err := members(b, nil)
	*rs = out
	return err
}

// members reads the members of the object b in order, except those skip
// takes (it returns true for the members it consumed).
func members(b []byte, skip func(name string, value json.RawMessage) (bool, error)) (RoomSettings, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("settings: want a JSON object")
	}
	var out RoomSettings
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, fmt.Errorf("settings: %q given twice", name)
		}
		seen[name] = true
		if skip != nil {
			if done, err := skip(name, v); done || err != nil {
				if err != nil {
					return nil, err
				}
				continue
			}
		}
		out = append(out, Setting{name, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return out, nil
}

// Room is a room's settings and stats: the answer of GET and PUT
// /api/v1/rooms/{room}, one object {"room", the settings…,
// "off_for_shards", "stats"}.
type Room struct {
	Room     string
	Settings RoomSettings
	// OffForShards names the settings that are off because the room's
	// line is spread over several shards (omitted when it is not).
	OffForShards []string
	Stats        RoomStats
}

// MarshalJSON writes r as one object: room, the settings in order, stats.
func (r Room) MarshalJSON() ([]byte, error) {
	name, _ := json.Marshal(r.Room)
	stats, err := json.Marshal(r.Stats)
	if err != nil {
		return nil, err
	}
	b := append([]byte(`{"room":`), name...)
	b = r.Settings.appendMembers(b, false)
	if len(r.OffForShards) > 0 {
		off, _ := json.Marshal(r.OffForShards)
		b = append(append(b, `,"off_for_shards":`...), off...)
	}
	b = append(append(b, `,"stats":`...), stats...)
	return append(b, '}'), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Room) UnmarshalJSON(b []byte) error {
	var room Room
	settings, err := members(b, func(name string, v json.RawMessage) (bool, error) {
		switch name {
		case "room":
			return true, json.Unmarshal(v, &room.Room)
		case "stats":
			return true, json.Unmarshal(v, &room.Stats)
		case "off_for_shards":
			return true, json.Unmarshal(v, &room.OffForShards)
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	room.Settings = settings
	*r = room
	return nil
}

// SettingInfo describes one room setting: the answer of GET
// /api/v1/settings lists them, from which the console builds its form.
type SettingInfo struct {
	Name string `json:"name"`
	// Type is the JSON Schema type (integer, number, boolean, string);
	// Format a string's format (date-time), Enum its values.
	Type   string   `json:"type"`
	Format string   `json:"format,omitempty"`
	Enum   []string `json:"enum,omitempty"`
	// Unit spells the unit for people (ms, s, /s).
	Unit string `json:"unit,omitempty"`
	Help string `json:"help"`
	// Minimum and Maximum are the widest range accepted; another setting
	// may narrow it (claim_window_seconds ≤ active_ttl_seconds).
	Minimum *float64 `json:"minimum,omitempty"`
	Maximum *float64 `json:"maximum,omitempty"`
	// Fixed settings are chosen when the room is made.
	Fixed bool `json:"fixed,omitempty"`
}

// SettingList is the answer of GET /api/v1/settings.
type SettingList struct {
	Settings []SettingInfo `json:"settings"`
}
