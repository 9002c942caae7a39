package hold

import (
	"context"
	"time"

	"usher/internal/fault"
)

// WithTimeout returns s with a deadline of d on every call (d <= 0: s
// itself). A call that misses it fails with ErrUnavailable, so that a hung
// hold store answers 503 instead of stalling a request. s must honour ctx.
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

// call runs f under the deadline; a missed deadline is ErrUnavailable,
// whatever the backend returned.
func call[T any](t *timeoutStore, ctx context.Context, op string, f func(context.Context) (T, error)) (T, error) {
	return fault.Bounded(ctx, t.d, ErrUnavailable, "hold: "+op, f)
}

// none adapts a call that returns only an error.
func none(f func(context.Context) error) func(context.Context) (struct{}, error) {
	return func(ctx context.Context) (struct{}, error) { return struct{}{}, f(ctx) }
}

func (t *timeoutStore) HoldSeats(ctx context.Context, scope, holder string, seats []string, limit int, ttl time.Duration, now time.Time) (Hold, error) {
	return call(t, ctx, "hold seats", func(ctx context.Context) (Hold, error) {
		return t.s.HoldSeats(ctx, scope, holder, seats, limit, ttl, now)
	})
}

func (t *timeoutStore) Get(ctx context.Context, scope, id string, now time.Time) (Hold, error) {
	return call(t, ctx, "get", func(ctx context.Context) (Hold, error) { return t.s.Get(ctx, scope, id, now) })
}

func (t *timeoutStore) Release(ctx context.Context, scope, id string, now time.Time) error {
	_, err := call(t, ctx, "release", none(func(ctx context.Context) error { return t.s.Release(ctx, scope, id, now) }))
	return err
}

func (t *timeoutStore) Find(ctx context.Context, scope, seat string, now time.Time) (Hold, error) {
	return call(t, ctx, "find", func(ctx context.Context) (Hold, error) { return t.s.Find(ctx, scope, seat, now) })
}

func (t *timeoutStore) HeldSeats(ctx context.Context, scope string, now time.Time) ([]string, error) {
	return call(t, ctx, "held seats", func(ctx context.Context) ([]string, error) { return t.s.HeldSeats(ctx, scope, now) })
}

func (t *timeoutStore) SetStock(ctx context.Context, scope string, total int64) error {
	_, err := call(t, ctx, "set stock", none(func(ctx context.Context) error { return t.s.SetStock(ctx, scope, total) }))
	return err
}

func (t *timeoutStore) HoldStock(ctx context.Context, scope, holder string, n, limit int64, ttl time.Duration, now time.Time) (Hold, error) {
	return call(t, ctx, "hold stock", func(ctx context.Context) (Hold, error) {
		return t.s.HoldStock(ctx, scope, holder, n, limit, ttl, now)
	})
}

func (t *timeoutStore) Stock(ctx context.Context, scope string, now time.Time) (int64, error) {
	return call(t, ctx, "stock", func(ctx context.Context) (int64, error) { return t.s.Stock(ctx, scope, now) })
}

func (t *timeoutStore) Consume(ctx context.Context, scope, id string, now time.Time) error {
	_, err := call(t, ctx, "consume", none(func(ctx context.Context) error { return t.s.Consume(ctx, scope, id, now) }))
	return err
}

func (t *timeoutStore) Lapsed(ctx context.Context, scope string, now time.Time, max int) ([]Hold, error) {
	return call(t, ctx, "lapsed", func(ctx context.Context) ([]Hold, error) { return t.s.Lapsed(ctx, scope, now, max) })
}
