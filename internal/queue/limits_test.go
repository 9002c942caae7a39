package queue_test

import (
	"testing"
	"time"

	"usher/internal/queue"
)

// TestLimits: the cap follows the inventory, the rate and batch the
// adaptive controller, the near zone that rate, the grace presence and
// the active TTL.
func TestLimits(t *testing.T) {
	s := queue.DefaultSettings()
	s.MaxActive, s.AdmitRate, s.Interval = 100, 20, 500*time.Millisecond
	s.PresenceTimeout, s.ActiveTTL, s.VisitorsPerUnit = 10*time.Second, time.Minute, 2
	for _, tc := range []struct {
		name string
		set  func(*queue.Settings)
		c    queue.Control
		inv  queue.Inventory
		want queue.Limits
	}{
		{"static, unknown inventory", nil, queue.Control{}, queue.Inventory{},
			queue.Limits{Cap: 100, Rate: 20, Batch: 10, Near: 400, Presence: 10 * time.Second, Grace: 70 * time.Second}},
		{"few units left", nil, queue.Control{}, queue.Inventory{Units: 7, Known: true},
			queue.Limits{Cap: 14, Rate: 20, Batch: 10, Near: 400, Presence: 10 * time.Second, Grace: 70 * time.Second}},
		{"sold out", nil, queue.Control{}, queue.Inventory{Known: true},
			queue.Limits{Cap: 0, Rate: 20, Batch: 10, Near: 400, Presence: 10 * time.Second, Grace: 70 * time.Second}},
		{"adaptive at 40/s", func(s *queue.Settings) { s.Admission = queue.Adaptive }, queue.Control{Version: 1, Rate: 40}, queue.Inventory{},
			queue.Limits{Cap: 100, Rate: 40, Batch: 20, Near: 800, Presence: 10 * time.Second, Grace: 70 * time.Second}},
		{"presence off", func(s *queue.Settings) { s.PresenceTimeout = 0 }, queue.Control{}, queue.Inventory{},
			queue.Limits{Cap: 100, Rate: 20, Batch: 10, Near: 100, Grace: time.Minute}},
	} {
		set := s
		if tc.set != nil {
			tc.set(&set)
		}
		if got := set.Limits(tc.c, tc.inv); got != tc.want {
			t.Errorf("%s: Limits = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
