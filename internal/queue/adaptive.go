package queue

import (
	"context"
	"time"
)

// Origin signals for adaptive admission (control.go). Every source of
// signals (usher proxy, the gate middleware, POST …/signals) records into
// this instance's pool of the room; Control adds the pool to the store's,
// where every instance's samples meet, and runs the room's controller step
// when it is due. A room that is not adaptive in this instance's view
// records nothing.

// Observe records one origin request of room: its latency and whether it
// failed (a 5xx, or no answer).
func (q *Queue) Observe(room string, latency time.Duration, failed bool) {
	if !q.adaptive(room) {
		return
	}
	q.sigMu.Lock()
	defer q.sigMu.Unlock()
	q.pool(room).Add(latency, failed)
}

// AddSignals records a batch of signals of room (the API's signals
// endpoint); false when the room is not adaptive and they were dropped.
func (q *Queue) AddSignals(room string, add Signals) bool {
	if !q.adaptive(room) {
		return false
	}
	q.sigMu.Lock()
	defer q.sigMu.Unlock()
	q.pool(room).Merge(add, 1)
	return true
}

// pool is this instance's pool of room's signals; the caller holds sigMu.
func (q *Queue) pool(room string) *Signals {
	s := q.local[room]
	if s == nil {
		s = new(Signals)
		q.local[room] = s
	}
	return s
}

func (q *Queue) adaptive(room string) bool {
	v, ok := q.View(room)
	return ok && v.Settings.Admission == Adaptive
}

// Control adds this instance's signals of room to the store's pool and,
// when the room's control period has passed since its last step, runs one
// controller step on the pool and stores it (Store.SetControl: when
// another instance stepped first, this one's step is dropped, and its
// samples stay in the pool for the next). The admission scheduler calls it
// a few times per second per room.
func (q *Queue) Control(ctx context.Context, room string) error {
	q.sigMu.Lock()
	local := q.local[room]
	delete(q.local, room)
	q.sigMu.Unlock()
	v, ok := q.View(room)
	if !ok || v.Settings.Admission != Adaptive || q.control == nil {
		return nil
	}
	now := q.now()
	due := v.Settings.ControlDue(v.Control, now)
	if local == nil && !due {
		return nil
	}
	if local == nil {
		local = new(Signals)
	}
	pool, err := q.control.AddSignals(ctx, room, *local)
	if err != nil || !due {
		return err
	}
	next, used := v.Settings.Step(v.Control, Window{Signals: pool, Waiting: v.Waiting, Admitted: v.AdmittedTotal}, now)
	if !used {
		return nil
	}
	stored, err := q.control.SetControl(ctx, room, next, pool)
	if err != nil || !stored {
		return err
	}
	if next.Rate != v.Control.Rate {
		q.log.Debug("adaptive admission rate", "room", room, "rate", next.Rate, "was", v.Control.Rate,
			"p95", next.P95, "target", v.Settings.Target(next))
	}
	return q.refreshRoom(ctx, room)
}
