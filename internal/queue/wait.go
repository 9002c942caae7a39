package queue

import (
	"math"
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
// every 1.5 s near the front: FastPolls).
func (v View) Wait(position int64) (f Forecast, pollAfter time.Duration) {
	f = v.Forecast(position)
	return f, PollAfter(f.ETA, position <= v.FastZone())
}

// PollBase is the poll interval before jitter that view v gives a visitor
// waiting at position (Wait's pacing without the jitter): what a planner
// sums over the line to count the polls a second.
func (v View) PollBase(position int64) time.Duration {
	return PollBase(v.Forecast(position).ETA, position <= v.FastZone())
}

// FastZone is how many visitors from the head poll every 1.5 s (PollBase's
// exact): FastPolls of the settings in force, and at least five seconds of
// admissions at the measured rate.
func (v View) FastZone() int64 {
	return max(FastPolls(v.Settings.Current(v.Control)), int64(math.Ceil(5*v.Rate)))
}

// RoomState is the room's state as visitors are told it at now: its
// EffectiveState (sold_out while its inventory is 0), or
// InPreQueue before the opening of a room that is open or paused.
func (v View) RoomState(now time.Time) string {
	state := v.EffectiveState()
	if !state.Refuses() && v.PreQueue(now) {
		return string(InPreQueue)
	}
	return string(state)
}

// Place is what a visitor is told about its entry; the edges answer it as
// a wire.Entry (wire.EntryFor(wire.Place(p)): the two types are the same
// fields, pinned by gate's tests).
type Place struct {
	Room   string
	Ticket string
	// RoomState is View.RoomState's.
	RoomState string
	// Status is the Entry's.
	Status string
	// Position (1 at the head), ETA and PollAfter count when waiting;
	// ETALow and ETAHigh are the ETA's range (both zero: none).
	Position                        int64
	ETA, ETALow, ETAHigh, PollAfter time.Duration
	// Pass and PassExpiresAt count when active; the edge sets them.
	Pass          string
	PassExpiresAt time.Time
	// OpensAt counts in the pre-queue: ETA is the time left until it.
	OpensAt time.Time
}

// Place is what a visitor is told, at now, about entry e in room by view
// v: the room's state as visitors see it, the position with its ETA and
// poll pacing, or in the pre-queue (a waiting entry at position 0) the
// countdown to the opening. The API and the proxy both answer through it;
// the caller adds the ticket and, for an active entry, the pass.
func (v View) Place(now time.Time, room string, e Entry) Place {
	p := Place{Room: room, RoomState: v.RoomState(now), Status: string(e.Status), Position: e.Position}
	switch {
	case e.Status == Waiting && e.Position == 0:
		p.RoomState, p.OpensAt = string(InPreQueue), v.Settings.OpensAt
		p.ETA, p.PollAfter = v.PreQueueWait(now)
	case e.Status == Waiting:
		var f Forecast
		f, p.PollAfter = v.Wait(e.Position)
		p.ETA, p.ETALow, p.ETAHigh = f.ETA, f.Low, f.High
	}
	return p
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
