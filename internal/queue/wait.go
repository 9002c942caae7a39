package queue

import (
	"math/rand/v2"
	"time"
)

// ViewOrDefault returns this instance's view of room, or, before the first
// one, a view of the default settings with the configured rate.
func (q *Queue) ViewOrDefault(room string) View {
	if v, ok := q.View(room); ok {
		return v
	}
	d := DefaultSettings()
	return View{Stats: Stats{Settings: d}, Rate: d.AdmitRate}
}

// Wait is what view v tells a visitor waiting at position (1 at the head):
// the forecast wait (ETA and range) and when to poll again (PollAfter,
// exact near the front).
func (v View) Wait(position int64) (f Forecast, pollAfter time.Duration) {
	f = v.Forecast(position)
	return f, PollAfter(f.ETA, position <= ExactWithin(v))
}

// RoomState is the room's state as visitors are told it at now: its
// Settings.State, or "pre_queue" before the opening of a room that is
// open or paused.
func (v View) RoomState(now time.Time) string {
	if !v.Settings.State.Refuses() && v.PreQueue(now) {
		return "pre_queue"
	}
	return string(v.Settings.State)
}

// PreQueue reports whether the room is in its pre-queue at now: it has an
// opening draw still to come (Draw.PreQueue).
func (v View) PreQueue(now time.Time) bool { return v.Draw.PreQueue(v.Settings, now) }

// PreQueueWait is what a pre-queue entrant is told at now: the time left
// until the opening, and when to poll again: that time, at least 1.5 s and
// at most 8 s, with ±20 % jitter, so that the polls after the opening
// spread over seconds instead of arriving at once.
func (v View) PreQueueWait(now time.Time) (untilOpen, pollAfter time.Duration) {
	untilOpen = max(0, v.Settings.OpensAt.Sub(now))
	base := min(max(untilOpen, 1500*time.Millisecond), 8*time.Second)
	return untilOpen, time.Duration(float64(base) * (0.8 + 0.4*rand.Float64()))
}
