package queue

import (
	"context"

	"usher/internal/event"
)

// The queue's events (package event), emitted by the wrapper of the
// instance that made the change, after the store did it: entered (a new
// place), admitted (one per visitor of an admission step, or at once on a
// passthrough entry), expired and skipped (a step's counts) and left. With
// no Options.Events nothing is emitted and nothing costs more. Emitting
// never blocks (event.Emitter); the events are best effort.

// emit hands an event to the emitter, if there is one.
func (q *Queue) emit(t event.Type, room, visitor string, d event.Data) {
	q.events.Emit(event.New(t, room, visitor, q.now(), d))
}

// emitEntered emits a new place's entered event: with the wait forecast
// from this instance's view when the visitor waits in line (none in a
// pre-queue), and an admitted event too when the entry was admitted at
// once.
func (q *Queue) emitEntered(room string, e Entry) {
	var d event.Data
	if e.Status == Waiting && e.Position > 0 {
		if v, ok := q.View(room); ok {
			d.ETAMS = v.Forecast(e.Position).ETA.Milliseconds()
		}
	}
	q.emit(event.Entered, room, e.Visitor, d)
	if e.Status == Active {
		q.emit(event.Admitted, room, e.Visitor, event.Data{})
	}
}

// emitStep emits an admission step's events.
func (q *Queue) emitStep(room string, res AdmitResult) {
	for _, v := range res.Admitted {
		q.emit(event.Admitted, room, v, event.Data{})
	}
	if res.Expired > 0 {
		q.emit(event.Expired, room, "", event.Data{Count: res.Expired})
	}
	if res.Skipped > 0 || res.Abandoned > 0 {
		q.emit(event.Skipped, room, "", event.Data{Count: res.Skipped, Removed: res.Abandoned})
	}
}

// leaveObserved leaves and emits a left event saying where the visitor
// was: it reads the entry first (one more store call, only with events on),
// so a visitor who was in neither line nor active set emits nothing.
func (q *Queue) leaveObserved(ctx context.Context, room, visitor string) error {
	e, err := q.store.Status(ctx, room, visitor, q.now())
	if err != nil {
		return err
	}
	if err := q.store.Leave(ctx, room, visitor); err != nil {
		return err
	}
	if e.Status == Waiting || e.Status == Active {
		q.emit(event.Left, room, visitor, event.Data{From: string(e.Status)})
	}
	return nil
}
