package httpapi_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"usher/internal/queue"
	"usher/internal/wire"
)

// TestSettingsTableIsTheSchema checks the OpenAPI document's room schemas
// against the settings table, which declares each setting once: the same
// names, in both RoomSettings (a PUT's body) and Room (an answer), with the
// table's type, format, values and range.
func TestSettingsTableIsTheSchema(t *testing.T) {
	schemas := mustSpec(t).doc.Components.Schemas
	var want []string
	for _, f := range queue.SettingFields() {
		want = append(want, f.JSON)
	}
	for _, name := range []string{"RoomSettings", "Room"} {
		props := schemas[name].Value.Properties
		var got []string
		for p := range props {
			if p != "room" && p != "stats" && p != "off_for_shards" {
				got = append(got, p)
			}
		}
		slices.Sort(got)
		if w := slices.Sorted(slices.Values(want)); !slices.Equal(got, w) {
			t.Errorf("%s's properties %v, want the table's %v", name, got, w)
		}
		for _, f := range queue.SettingFields() {
			p := props[f.JSON]
			if p == nil {
				continue
			}
			s := p.Value
			if !s.Type.Is(f.Type) {
				t.Errorf("%s.%s: type %v, want %s", name, f.JSON, s.Type, f.Type)
			}
			var enum []string
			for _, v := range s.Enum {
				enum = append(enum, fmt.Sprint(v))
			}
			if !slices.Equal(enum, f.Enum) {
				t.Errorf("%s.%s: enum %v, want %v", name, f.JSON, enum, f.Enum)
			}
			if name != "Room" {
				continue // a PUT's body is checked by the server, which names the field
			}
			if s.Format != f.Format && !(f.Type == "integer" && s.Format == "int64") {
				t.Errorf("%s.%s: format %q, want %q", name, f.JSON, s.Format, f.Format)
			}
			if f.Ranged() && (s.Min == nil || *s.Min != f.Min || s.Max == nil || *s.Max != f.Max) {
				t.Errorf("%s.%s: range %v to %v, want %v to %v", name, f.JSON, deref(s.Min), deref(s.Max), f.Min, f.Max)
			}
		}
	}
}

func deref(p *float64) any {
	if p == nil {
		return "none"
	}
	return *p
}

// TestSettingsServed reads the table through the API and sets every
// setting through it: each value the table describes goes in by a PUT and
// comes back in the answer.
func TestSettingsServed(t *testing.T) {
	e := newEnv(t, false)
	r := e.do(nil, "GET", "/api/v1/settings", "", "")
	var list wire.SettingList
	if err := json.Unmarshal(r.body, &list); r.status != 200 || err != nil || len(list.Settings) != len(queue.SettingFields()) {
		t.Fatalf("GET /api/v1/settings: %d %v: %s", r.status, err, r.body)
	}
	// A value for each setting other than its default, valid together.
	values := map[string]any{
		"state": "paused", "max_active": 7, "admit_rate": 2.5, "interval_ms": 250, "active_ttl_seconds": 600,
		"claim_window_seconds": 45, "client_enters_per_minute": 9, "pow_bits": 3, "require_identity": true,
		"require_invite": true, "max_waiting": 1000, "presence_timeout_seconds": 20, "visitors_per_unit": 1.5,
		"opens_at": "2030-01-02T03:04:05.678Z", "admission": "adaptive", "target_p95_ms": 150, "min_admit_rate": 2,
		"max_admit_rate": 90, "control_period_ms": 4000, "priority_share": 0.2, "queueing": "random",
		"draw_window_seconds": 30, "shard_strategy": "counter", "shards": 1,
	}
	body := wire.RoomSettings{}
	for _, s := range list.Settings {
		v, ok := values[s.Name]
		if !ok {
			t.Fatalf("no test value for setting %s", s.Name)
		}
		body = body.With(s.Name, v)
	}
	raw, _ := json.Marshal(body)
	r = e.do(nil, "PUT", "/api/v1/rooms/every", adminKey, string(raw))
	var room wire.Room
	if err := json.Unmarshal(r.body, &room); r.status != 201 || err != nil {
		t.Fatalf("PUT every setting: %d %v: %s", r.status, err, r.body)
	}
	for _, s := range list.Settings {
		var got any
		if ok, err := room.Settings.Get(s.Name, &got); !ok || err != nil || fmt.Sprint(got) != fmt.Sprint(values[s.Name]) {
			t.Errorf("%s: answered %v (%v, %v), want %v", s.Name, got, ok, err, values[s.Name])
		}
	}
	// A name the table does not know, and a value of the wrong type, are
	// refused with the name.
	for _, bad := range []string{`{"max_actives":3}`, `{"max_active":"3"}`, `{"max_active":1,"max_active":2}`} {
		if r := e.do(nil, "PUT", "/api/v1/rooms/every", adminKey, bad); r.status != 400 {
			t.Errorf("PUT %s: %d %s, want 400", bad, r.status, r.body)
		}
	}
}
