package queue

import (
	"math"
	"math/rand/v2"
	"time"

	"usher/internal/queue/forecast"
	"usher/internal/wire"
)

// ViewOrDefault returns this instance's view of room, or, before the first
// one, a view of the default settings with the configured rate.
func (q *Queue) ViewOrDefault(room string) View {
	if v := q.view(room); v != nil {
		return *v
	}
	return defaultView()
}

func defaultView() View {
	d := DefaultSettings()
	return View{Stats: Stats{Settings: d}, Rates: forecast.Rates{Rate: d.AdmitRate}}
}

// Place is what the visitor of entry e in room is told now (View.Place)
// by this instance's latest view, or before the room's first view by
// ViewOrDefault's. It reads the view by pointer, without a copy; a status
// poll reads it twice, in Status and here, as a held poll
// (Queue.AwaitTurn) must answer with the view of when it ends.
func (q *Queue) Place(room string, e Entry) wire.Place {
	v := q.view(room)
	if v == nil {
		d := defaultView()
		v = &d
	}
	return v.Place(q.now(), room, e)
}

// Wait is what view v tells a visitor waiting at position (1 at the head):
// the forecast wait (ETA and range) and when to poll again (PollBase with
// forecast.Jitter).
func (v *View) Wait(position int64) (f Forecast, pollAfter time.Duration) {
	f = v.Forecast(position)
	return f, forecast.Jitter(v.pace(position, f.ETA), rand.Float64())
}

// PollBase is the poll interval before jitter that view v gives a visitor
// waiting at position (forecast.Pace): what a planner sums over the line
// to count the polls a second.
func (v *View) PollBase(position int64) time.Duration {
	return v.pace(position, v.Forecast(position).ETA)
}

func (v *View) pace(position int64, eta time.Duration) time.Duration {
	return forecast.Pace(position, v.Near(), eta, v.topRate())
}

// Near is the near zone as view v answers it: the places from the head
// whose polls go to the store for an exact answer (Queue.Status) and are
// paced at forecast.FastPoll. It is the room's Settings.Near at the
// highest of the configured, in-force and measured rates, plus the
// admissions a view up to staleAfter old may have missed (an estimate
// overstates the place by them): it holds the store's watched zone
// whichever rate the store used.
func (v *View) Near() int64 {
	rate := v.topRate()
	s := v.Settings
	s.AdmitRate = rate
	return s.Near() + int64(math.Ceil(staleAfter.Seconds()*rate))
}

// topRate is the highest of view v's configured, in-force and measured
// admission rates.
func (v *View) topRate() float64 {
	return max(v.Settings.AdmitRate, v.Settings.CurrentRate(v.Control), v.Rate)
}

// RoomState is the room's state as visitors are told it at now: its
// EffectiveState (sold_out while its inventory is 0), or
// InPreQueue before the opening of a room that is open or paused.
func (v *View) RoomState(now time.Time) string {
	state := v.EffectiveState()
	if !state.Refuses() && v.PreQueue(now) {
		return string(InPreQueue)
	}
	return string(state)
}

// Place is what a visitor is told, at now, about entry e in room by view
// v: the room's state as visitors see it, the position with its ETA and
// poll pacing, or in the pre-queue (a waiting entry at position 0) the
// countdown to the opening. The API and the proxy both answer through it;
// the caller adds the ticket and, for an active entry, the pass.
func (v *View) Place(now time.Time, room string, e Entry) wire.Place {
	p := wire.Place{Room: room, RoomState: v.RoomState(now), Status: string(e.Status), Position: e.Position}
	switch {
	case e.Status == Waiting && e.Position == 0:
		var state RoomState
		state, p.OpensAt = v.drawAt(now)
		p.RoomState = string(state)
		p.ETA, p.PollAfter = v.PreQueueWait(now)
	case e.Status == Waiting:
		var f Forecast
		f, p.PollAfter = v.Wait(e.Position)
		p.ETA, p.ETALow, p.ETAHigh = f.ETA, f.Low, f.High
	}
	return p
}

// Issued gives place p its new ticket, if any (ticket "": none, nothing
// changes): an entry's, or a changed place's (after the opening draw). The
// first poll on a new ticket comes at a random point of its interval
// (forecast.First).
func Issued(p *wire.Place, ticket string) {
	if ticket == "" {
		return
	}
	p.Ticket = ticket
	if p.Status == string(Waiting) {
		p.PollAfter = forecast.First(p.PollAfter, rand.Float64())
	}
}

// PreQueue reports whether the room is in its pre-queue at now: it has an
// opening draw still to come (Draw.PreQueue).
func (v *View) PreQueue(now time.Time) bool { return v.Draw.PreQueue(v.Settings, now) }

// drawAt is what a place waiting for a draw at now waits for, and when it
// is drawn: the opening in the pre-queue, else the end of a random room's
// window.
func (v *View) drawAt(now time.Time) (RoomState, time.Time) {
	if v.Settings.Queueing == QueueRandom && !v.PreQueue(now) {
		_, ends := DrawWindow(now, v.Settings.DrawWindow)
		return InDrawWindow, ends
	}
	return InPreQueue, v.Settings.OpensAt
}

// PreQueueWait is what a pre-queue entrant (or one waiting for a random
// room's draw) is told at now: the time left until the draw, and when to
// poll again: that time, at least forecast.FastPoll and at most 8 s, with
// jitter, so that the polls after the draw spread over seconds instead of
// arriving at once.
func (v *View) PreQueueWait(now time.Time) (untilOpen, pollAfter time.Duration) {
	_, at := v.drawAt(now)
	untilOpen = max(0, at.Sub(now))
	base := min(max(untilOpen, forecast.FastPoll), 8*time.Second)
	return untilOpen, forecast.Jitter(base, rand.Float64())
}
