package redisshard

import (
	"errors"
	"strings"
	"testing"
	"time"

	"usher/internal/queue"
)

// TestForShards: a room of several shards takes the defaults with what its
// line lacks turned off, and refuses each of those set otherwise, naming
// the setting.
func TestForShards(t *testing.T) {
	base := queue.DefaultSettings()
	base.Shards = 4
	got, err := forShards(base)
	if err != nil || got.PresenceTimeout != 0 || got.VisitorsPerUnit != base.VisitorsPerUnit || got.ClaimWindow != got.ActiveTTL {
		t.Errorf("forShards(defaults) = %+v, %v; want presence off, the inventory cap kept, claim window = active_ttl", got, err)
	}
	for _, tc := range []struct {
		name string
		set  func(*queue.Settings)
		want string
	}{
		{"presence", func(s *queue.Settings) { s.PresenceTimeout = 20 * time.Second }, "presence_timeout"},
		{"opens_at", func(s *queue.Settings) { s.OpensAt = time.UnixMilli(1_900_000_000_000) }, "opens_at"},
		{"max_waiting", func(s *queue.Settings) { s.MaxWaiting = 10 }, "max_waiting"},
		{"lanes", func(s *queue.Settings) { s.PriorityShare = 0.2 }, "priority_share"},
	} {
		set := base
		tc.set(&set)
		if _, err := forShards(set); !errors.Is(err, queue.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: forShards = %v, want ErrInvalid naming %s", tc.name, err, tc.want)
		}
	}
}
