// Package admission runs the admission scheduler: one loop per room that
// calls the queue's atomic admission step with a fixed delay (the next step
// starts Interval after the previous one finished, seed 001 §4).
//
// Every usher instance runs a Scheduler. The store's step keeps MaxActive and
// the room-wide AdmitRate exact however many instances run it, so extra
// instances add availability, not admissions.
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
	q *queue.Queue
	// discover is how often the room list is re-read to start loops for
	// new rooms.
	discover time.Duration
	log      *slog.Logger
}

// New returns a Scheduler for q. It starts nothing; call Run.
func New(q *queue.Queue, log *slog.Logger) *Scheduler {
	return &Scheduler{q: q, discover: time.Second, log: log}
}

// Run runs one loop per room until ctx ends; it returns nil then. Store
// faults are logged and retried at the next step; a room the store no longer
// has stops its loop (and gets a new one if it is created again).
func (s *Scheduler) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	var mu sync.Mutex
	running := map[string]bool{}
	t := time.NewTicker(s.discover)
	defer t.Stop()
	for {
		rooms, err := s.q.Rooms(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("list rooms", "err", err)
		}
		mu.Lock()
		for _, room := range rooms {
			if !running[room] {
				running[room] = true
				wg.Add(1)
				go func() {
					defer wg.Done()
					s.loop(ctx, room)
					mu.Lock()
					delete(running, room) // started again if the room comes back
					mu.Unlock()
				}()
			}
		}
		mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (s *Scheduler) loop(ctx context.Context, room string) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		_, err := s.q.Admit(ctx, room)
		switch {
		case errors.Is(err, queue.ErrRoomNotFound):
			s.log.Info("room gone; its admission loop stops", "room", room)
			return
		case err != nil && ctx.Err() == nil:
			s.log.Warn("admission step", "room", room, "err", err)
		}
		timer.Reset(s.interval(room))
	}
}

// interval is the room's configured delay from this instance's view, or
// the default before the first view.
func (s *Scheduler) interval(room string) time.Duration {
	if v, ok := s.q.View(room); ok {
		return v.Settings.Interval
	}
	return queue.DefaultSettings().Interval
}
