package queue

import (
	"context"
	"time"

	"usher/internal/fault"
)

// WithTimeout returns s with a deadline of d on every call (d <= 0: s
// itself). A call that misses it fails with ErrUnavailable, so that a hung
// store answers 503 (or lets passes through under fail-open) instead of
// stalling a request, the admission step or the view refresh. s must
// honour ctx. New applies it with Options.StoreTimeout.
func WithTimeout(s Store, d time.Duration) Store {
	if d <= 0 {
		return s
	}
	return &timeoutStore{s: s, d: d}
}

// timeoutStore is the Store that WithTimeout returns.
type timeoutStore struct {
	s Store
	d time.Duration
}

var _ Store = (*timeoutStore)(nil)

// call runs f under the deadline.
func call[T any](d time.Duration, ctx context.Context, op string, f func(context.Context) (T, error)) (T, error) {
	return fault.Bounded(ctx, d, ErrUnavailable, "queue: "+op, f)
}

func (t *timeoutStore) PutRoom(ctx context.Context, room string, s Settings, o PutOptions) (bool, error) {
	return call(t.d, ctx, "put room", func(ctx context.Context) (bool, error) { return t.s.PutRoom(ctx, room, s, o) })
}

func (t *timeoutStore) Rooms(ctx context.Context) ([]string, error) {
	return call(t.d, ctx, "rooms", t.s.Rooms)
}

func (t *timeoutStore) Enter(ctx context.Context, room, visitor string, now time.Time, o EnterOptions) (Entry, bool, error) {
	var created bool
	e, err := call(t.d, ctx, "enter", func(ctx context.Context) (Entry, error) {
		e, c, err := t.s.Enter(ctx, room, visitor, now, o)
		created = c
		return e, err
	})
	return e, created, err
}

func (t *timeoutStore) Status(ctx context.Context, room, visitor string, now time.Time) (Entry, error) {
	return call(t.d, ctx, "status", func(ctx context.Context) (Entry, error) { return t.s.Status(ctx, room, visitor, now) })
}

func (t *timeoutStore) Leave(ctx context.Context, room, visitor string) error {
	_, err := call(t.d, ctx, "leave", func(ctx context.Context) (struct{}, error) { return struct{}{}, t.s.Leave(ctx, room, visitor) })
	return err
}

func (t *timeoutStore) Admit(ctx context.Context, room string, now time.Time) (AdmitResult, error) {
	return call(t.d, ctx, "admit", func(ctx context.Context) (AdmitResult, error) { return t.s.Admit(ctx, room, now) })
}

func (t *timeoutStore) Stats(ctx context.Context, room string, now time.Time) (Stats, error) {
	return call(t.d, ctx, "stats", func(ctx context.Context) (Stats, error) { return t.s.Stats(ctx, room, now) })
}

func (t *timeoutStore) SetInventory(ctx context.Context, room string, units int64) error {
	_, err := call(t.d, ctx, "set inventory", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, t.s.SetInventory(ctx, room, units)
	})
	return err
}

// timeoutControl is a ControlStore under a deadline per call.
type timeoutControl struct {
	c ControlStore
	d time.Duration
}

// controlOf is the ControlStore of s under deadline d (nil when s keeps
// no controller state).
func controlOf(s Store, d time.Duration) ControlStore {
	c, ok := s.(ControlStore)
	if !ok {
		return nil
	}
	if d <= 0 {
		return c
	}
	return timeoutControl{c, d}
}

func (t timeoutControl) AddSignals(ctx context.Context, room string, s Signals) (Signals, error) {
	return call(t.d, ctx, "add signals", func(ctx context.Context) (Signals, error) { return t.c.AddSignals(ctx, room, s) })
}

func (t timeoutControl) SetControl(ctx context.Context, room string, next Control, used Signals) (bool, error) {
	return call(t.d, ctx, "set control", func(ctx context.Context) (bool, error) { return t.c.SetControl(ctx, room, next, used) })
}

func (t *timeoutStore) DeleteRoom(ctx context.Context, room string, force bool, now time.Time) error {
	_, err := call(t.d, ctx, "delete room", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, t.s.DeleteRoom(ctx, room, force, now)
	})
	return err
}
