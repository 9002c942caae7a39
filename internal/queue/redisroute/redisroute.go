// Package redisroute is the queue store of a Redis deployment: it sends
// each room to redisqueue (a room of one line) or to redisshard (a room
// whose line is spread over several shards), by the room's settings when
// it is made and by where the room is for every other call. It stores
// nothing itself; its limits are its two backends'.
package redisroute

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/queue"
	"usher/internal/queue/redisqueue"
	"usher/internal/queue/redisshard"
)

// Router is the queue.Store of a Redis deployment: it sends each room to
// redisqueue (one shard) or to the QueueStore (several), by the room's
// settings when it is made and, for every other call, by where the room
// is. A room's name is held by one of them at a time: each refuses to
// make a room whose name the other holds, atomically (the two hashes share
// the room's slot). The router remembers the rooms it found sharded; any
// other room goes to redisqueue first, and to the QueueStore when
// redisqueue does not know it, so a sharded room's first call on an
// instance costs one more round trip, and a room Redis lost and that was
// made again with another layout is found where it is.
type Router struct {
	plain   *redisqueue.Store
	sharded *redisshard.QueueStore
	known   sync.Map // room → true: found sharded
	c       rueidis.Client
	wakes   []string // both stores' wake channels
}

var (
	_ queue.Store        = (*Router)(nil)
	_ queue.ControlStore = (*Router)(nil)
)

// New returns the store of rooms under prefix on the server or
// cluster behind c: rooms of one shard under prefix (redisqueue), rooms of
// several under prefix + "shard:". The caller owns c.
func New(c rueidis.Client, prefix string) *Router {
	shards := redisshard.New(c, prefix+"shard:", 0)
	plain := redisqueue.New(c, prefix)
	plain.SetExclusive(shards.HomeKey)
	return &Router{
		plain:   plain,
		sharded: redisshard.NewQueueStore(shards, plain.MetaKey),
		c:       c,
		wakes:   []string{prefix + "wake", shards.WakeChannel()},
	}
}

// SetAck sets how the rooms of one shard acknowledge writes
// (redisqueue.Store.SetAck). Call it before the router is used.
func (r *Router) SetAck(a redisqueue.Ack) { r.plain.SetAck(a) }

// Wakes implements queue.Waker for both stores' rooms.
func (r *Router) Wakes(ctx context.Context, wake func(room string)) error {
	return redisqueue.Wakes(ctx, r.c, wake, r.wakes...)
}

// route runs f on the store that holds room: the one it was last found
// in, else redisqueue, then the QueueStore when the first does not know
// the room.
func route[T any](r *Router, room string, f func(queue.Store) (T, error)) (T, error) {
	first, second := queue.Store(r.plain), queue.Store(r.sharded)
	_, sharded := r.known.Load(room)
	if sharded {
		first, second = second, first
	}
	v, err := f(first)
	if !errors.Is(err, queue.ErrRoomNotFound) {
		return v, err
	}
	v, err = f(second)
	switch {
	case err == nil && !sharded:
		r.known.Store(room, true)
	case err == nil, errors.Is(err, queue.ErrRoomNotFound):
		r.known.Delete(room)
	}
	return v, err
}

// PutRoom implements queue.Store: a room of several shards goes to the
// QueueStore, any other to redisqueue; each refuses a name the other
// holds (a room's shards are fixed once it exists).
func (r *Router) PutRoom(ctx context.Context, room string, s queue.Settings, o queue.PutOptions) (bool, error) {
	created, err := r.storeFor(s).PutRoom(ctx, room, s, o)
	r.placed(room, s, err)
	return created, err
}

// storeFor is the store that keeps a room of settings s.
func (r *Router) storeFor(s queue.Settings) queue.Store {
	if s.Sharded() {
		return r.sharded
	}
	return r.plain
}

// placed remembers where a PutRoom that succeeded put room.
func (r *Router) placed(room string, s queue.Settings, err error) {
	switch {
	case err != nil:
	case s.Sharded():
		r.known.Store(room, true)
	default:
		r.known.Delete(room)
	}
}

// Rooms implements queue.Store: both stores' rooms.
func (r *Router) Rooms(ctx context.Context) ([]string, error) {
	plain, err := r.plain.Rooms(ctx)
	if err != nil {
		return nil, err
	}
	sharded, err := r.sharded.Rooms(ctx)
	if err != nil {
		return nil, err
	}
	return slices.Compact(slices.Sorted(slices.Values(append(plain, sharded...)))), nil
}

// Enter implements queue.Store.
func (r *Router) Enter(ctx context.Context, room, visitor string, now time.Time, o queue.EnterOptions) (queue.Entry, bool, error) {
	type entered struct {
		e       queue.Entry
		created bool
	}
	v, err := route(r, room, func(s queue.Store) (entered, error) {
		e, created, err := s.Enter(ctx, room, visitor, now, o)
		return entered{e, created}, err
	})
	return v.e, v.created, err
}

// Status implements queue.Store.
func (r *Router) Status(ctx context.Context, room, visitor string, now time.Time) (queue.Entry, error) {
	return route(r, room, func(s queue.Store) (queue.Entry, error) { return s.Status(ctx, room, visitor, now) })
}

// Leave implements queue.Store.
func (r *Router) Leave(ctx context.Context, room, visitor string) error {
	_, err := route(r, room, func(s queue.Store) (struct{}, error) { return struct{}{}, s.Leave(ctx, room, visitor) })
	return err
}

// Admit implements queue.Store.
func (r *Router) Admit(ctx context.Context, room string, now time.Time) (queue.AdmitResult, error) {
	return route(r, room, func(s queue.Store) (queue.AdmitResult, error) { return s.Admit(ctx, room, now) })
}

// Stats implements queue.Store.
func (r *Router) Stats(ctx context.Context, room string, now time.Time) (queue.Stats, error) {
	return route(r, room, func(s queue.Store) (queue.Stats, error) { return s.Stats(ctx, room, now) })
}

// SetInventory implements queue.Store.
func (r *Router) SetInventory(ctx context.Context, room string, units int64) error {
	_, err := route(r, room, func(s queue.Store) (struct{}, error) { return struct{}{}, s.SetInventory(ctx, room, units) })
	return err
}

// AddSignals implements queue.ControlStore.
func (r *Router) AddSignals(ctx context.Context, room string, add queue.Signals) (queue.Signals, error) {
	return route(r, room, func(s queue.Store) (queue.Signals, error) { return s.(queue.ControlStore).AddSignals(ctx, room, add) })
}

// SetControl implements queue.ControlStore.
func (r *Router) SetControl(ctx context.Context, room string, next queue.Control, used queue.Signals) (bool, error) {
	return route(r, room, func(s queue.Store) (bool, error) { return s.(queue.ControlStore).SetControl(ctx, room, next, used) })
}

// DeleteRoom implements queue.Store.
func (r *Router) DeleteRoom(ctx context.Context, room string, force bool, now time.Time) error {
	_, err := route(r, room, func(s queue.Store) (struct{}, error) { return struct{}{}, s.DeleteRoom(ctx, room, force, now) })
	return err
}
