package queue

import "time"

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
// the estimated wait (ETA) and when to poll again (PollAfter, exact near the
// front).
func (v View) Wait(position int64) (eta, pollAfter time.Duration) {
	eta = ETA(v, position-1)
	return eta, PollAfter(eta, position <= ExactWithin(v))
}
