package queue_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"usher/internal/queue"
)

// TestSettingFields: names are distinct; each field's value survives
// Encode then Decode into default settings; the defaults are valid.
func TestSettingFields(t *testing.T) {
	set := queue.Settings{State: queue.SoldOut, MaxActive: 12345, AdmitRate: 0.1 + 0.2,
		Interval: 1234567 * time.Nanosecond, ActiveTTL: 90*time.Minute + 1, ClaimWindow: 7*time.Second + 3,
		ClientEntersPerMinute: 17, PowBits: 7, RequireIdentity: true, RequireInvite: true,
		OpensAt: time.UnixMilli(1_900_000_000_123).UTC(), MaxWaiting: 9, PresenceTimeout: 7*time.Second + 11,
		VisitorsPerUnit: 0.25 + 0.5, Admission: queue.Adaptive, TargetP95: 7*time.Millisecond + 1,
		MinAdmitRate: 1.5, MaxAdmitRate: 77.25, ControlPeriod: 3*time.Second + 5,
		Shards: 13, ShardStrategy: queue.ShardEstimate}
	seen := map[string]bool{}
	got := queue.DefaultSettings()
	for _, f := range queue.SettingFields() {
		if seen[f.Name] {
			t.Errorf("setting %q listed twice", f.Name)
		}
		seen[f.Name] = true
		if err := f.Decode(&got, f.Encode(set)); err != nil {
			t.Errorf("%s: Decode(Encode(%+v)): %v", f.Name, set, err)
		}
	}
	if got != set {
		t.Errorf("decoded %+v, want %+v", got, set)
	}
	if err := queue.DefaultSettings().Validate(); err != nil {
		t.Errorf("default settings: %v", err)
	}
}

// TestValidate: one case out of range per setting, at the limits, each
// naming the setting.
func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*queue.Settings)
		bad  string // the setting the error names; "" for valid
	}{
		{"state", func(s *queue.Settings) { s.State = "ajar" }, "state"},
		{"max_active low", func(s *queue.Settings) { s.MaxActive = queue.MinMaxActive - 1 }, "max_active"},
		{"max_active high", func(s *queue.Settings) { s.MaxActive = queue.MaxMaxActive + 1 }, "max_active"},
		{"max_active at the limits", func(s *queue.Settings) { s.MaxActive = queue.MaxMaxActive }, ""},
		{"admit_rate zero", func(s *queue.Settings) { s.AdmitRate = 0 }, "admit_rate"},
		{"admit_rate high", func(s *queue.Settings) { s.AdmitRate = queue.MaxAdmitRate * 1.001 }, "admit_rate"},
		{"admit_rate tiny", func(s *queue.Settings) { s.AdmitRate = 1e-300 }, "admit_rate"},
		{"client_enters_per_minute negative", func(s *queue.Settings) { s.ClientEntersPerMinute = -1 }, "client_enters_per_minute"},
		{"pow_bits high", func(s *queue.Settings) { s.PowBits = queue.MaxPowBits + 1 }, "pow_bits"},
		{"interval low", func(s *queue.Settings) { s.Interval = queue.MinInterval - 1 }, "interval"},
		{"interval high", func(s *queue.Settings) { s.Interval = queue.MaxInterval + 1 }, "interval"},
		{"active_ttl high", func(s *queue.Settings) { s.ActiveTTL = queue.MaxActiveTTL + 1 }, "active_ttl"},
		{"claim_window above active_ttl", func(s *queue.Settings) { s.ClaimWindow = s.ActiveTTL + 1 }, "claim_window"},
		{"claim_window at active_ttl", func(s *queue.Settings) { s.ClaimWindow = s.ActiveTTL }, ""},
		{"shards zero", func(s *queue.Settings) { s.Shards = 0 }, "shards"},
		{"shards high", func(s *queue.Settings) { s.Shards = queue.MaxShards + 1 }, "shards"},
		{"shard_strategy", func(s *queue.Settings) { s.ShardStrategy = "counters-only" }, "shard_strategy"},
		{"shard_strategy empty", func(s *queue.Settings) { s.ShardStrategy = "" }, "shard_strategy"},
		{"sharded at the limits", func(s *queue.Settings) { *s = shardable(*s); s.Shards = queue.MaxShards }, ""},
		{"one shard with everything", func(s *queue.Settings) { s.Shards, s.MaxWaiting = 1, 10 }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := queue.DefaultSettings()
			tc.edit(&s)
			err := s.Validate()
			switch {
			case tc.bad == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.bad != "" && (!errors.Is(err, queue.ErrInvalid) || !strings.HasPrefix(strings.TrimPrefix(err.Error(), "invalid input: "), tc.bad+" ")):
				t.Errorf("Validate() = %v, want ErrInvalid naming %s", err, tc.bad)
			}
		})
	}
}

// shardable is s with the settings a sharded room cannot have turned off,
// and 4 shards.
func shardable(s queue.Settings) queue.Settings {
	s.Shards, s.PresenceTimeout, s.VisitorsPerUnit, s.ClaimWindow = 4, 0, 0, s.ActiveTTL
	return s
}
