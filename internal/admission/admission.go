// Package admission runs the admission scheduler: one loop per room that
// calls the queue's atomic admission step (queue.Queue.Admit) with a fixed
// delay, the room's Interval after the previous step finished (seed 001 §4).
//
// Every usher instance runs a Scheduler. The store's step keeps MaxActive and
// the room-wide AdmitRate exact however many instances run it, so extra
// instances add availability, not admissions.
//
// Limits: the scheduler discovers no room itself. It follows the Queue's view
// (queue.Queue.ViewRooms, which queue.Queue.Run keeps in step with the
// store), and reads each room's settings from that view, never the store.
package admission

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"usher/internal/queue"
)

// Scheduler admits visitors into every room of a queue.
type Scheduler struct {
	q   *queue.Queue
	log *slog.Logger
}

// New returns a Scheduler for q. It starts nothing; call Run, with q.Run
// running beside it.
func New(q *queue.Queue, log *slog.Logger) *Scheduler {
	return &Scheduler{q: q, log: log}
}

// Run runs one loop per room of the queue's view until ctx ends; it returns
// nil then. A room's loop starts when the room joins the view and stops when
// it leaves it (the store lost the room). Store faults are logged and
// retried at the next step.
func (s *Scheduler) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	loops := map[string]context.CancelFunc{}
	defer func() {
		for _, stop := range loops {
			stop()
		}
		wg.Wait()
	}()
	for {
		rooms, changed := s.q.ViewRooms()
		listed := make(map[string]bool, len(rooms))
		for _, room := range rooms {
			listed[room] = true
			if loops[room] == nil {
				lctx, stop := context.WithCancel(ctx)
				loops[room] = stop
				wg.Go(func() { s.loop(lctx, room) })
			}
		}
		for room, stop := range loops {
			if !listed[room] {
				s.log.Info("room gone; its admission loop stops", "room", room)
				stop()
				delete(loops, room)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// RestMargin is how long past its rest (queue.Queue.RestLeft) a room's
// loop sleeps while nobody waits in it: time for the refresh to read the
// room again, after which it rests anew, or, if the view has aged (the
// store is failing), steps.
const RestMargin = time.Second

// ControlEvery is how often a room's loop hands this instance's origin
// signals to the store and lets the room's adaptive controller step when
// its period is due (queue.Queue.Control); rooms that are not adaptive
// cost nothing.
const ControlEvery = 250 * time.Millisecond

// loop runs room's admission steps until ctx ends. Each step's delay is the
// room's Interval read from the view; a step is skipped while the view shows
// nobody waiting (queue.Queue.RestLeft). The same loop runs the room's
// adaptive controller (queue.Queue.Control) every ControlEvery. A step that
// finds the room missing is not an error: the view drops the room at the
// next refresh, which stops the loop.
func (s *Scheduler) loop(ctx context.Context, room string) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	control := time.NewTicker(ControlEvery)
	defer control.Stop()
	controlFailures := queue.NewOutageLog(s.log, "adaptive admission control", "room", room)
	stepFailures := queue.NewOutageLog(s.log, "admission step", "room", room)
	for {
		select {
		case <-ctx.Done():
			return
		case <-control.C:
			if err := s.q.Control(ctx, room); !errors.Is(err, queue.ErrRoomNotFound) && ctx.Err() == nil {
				controlFailures.Observe(err, s.q.Now())
			}
			continue
		case <-timer.C:
		}
		// Nobody waits: a step would admit nobody. Sleep until the view
		// shows someone waiting, or the rest is over.
		if busy, left := s.q.Busy(room), s.q.RestLeft(room); left > 0 {
			control.Stop()
			rest := time.NewTimer(left + RestMargin)
			select {
			case <-ctx.Done():
				rest.Stop()
				return
			case <-busy:
			case <-rest.C:
			}
			rest.Stop()
			control.Reset(ControlEvery)
			timer.Reset(0)
			continue
		}
		_, err := s.q.Admit(ctx, room)
		switch {
		case errors.Is(err, queue.ErrRoomNotFound):
			s.log.Debug("admission step: room not found", "room", room)
		case ctx.Err() == nil:
			stepFailures.Observe(err, s.q.Now())
		}
		timer.Reset(s.q.ViewOrDefault(room).Settings.Interval)
	}
}
