package queue_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
)

// statsCounter is a store that counts its Stats calls.
type statsCounter struct {
	queue.Store
	n atomic.Int64
}

func (s *statsCounter) Stats(ctx context.Context, room string, now time.Time) (queue.Stats, error) {
	s.n.Add(1)
	return s.Store.Stats(ctx, room, now)
}

// TestIdleRoomsRestBetweenReads: a refresh re-reads a room nobody waits in
// once per IdleRefresh, not every Refresh; a visitor who comes to wait
// through this instance wakes the room at the next refresh, and a room
// someone waits in is read every time. RestLeft tells the scheduler which
// rooms need no step.
func TestIdleRoomsRestBetweenReads(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
	store := &statsCounter{Store: memqueue.New()}
	q := queue.New(store, queue.Options{Now: c.now, IdleRefresh: 5 * time.Second})
	s := queue.DefaultSettings()
	s.State = queue.Paused
	const rooms = 100
	for i := range rooms {
		if err := q.PutRoom(ctx, fmt.Sprintf("r%d", i), s); err != nil {
			t.Fatal(err)
		}
	}
	cycles := func(n int) int64 {
		t.Helper()
		before := store.n.Load()
		for range n {
			c.t = c.t.Add(100 * time.Millisecond)
			if err := refresh(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		return store.n.Load() - before
	}
	// 4 s of refreshes: every room was read when it was made (PutRoom).
	if got := cycles(40); got != 0 {
		t.Errorf("idle rooms read %d times in 4 s, want 0 (each read at its PUT)", got)
	}
	if got := q.RestLeft("r0"); got != time.Second {
		t.Errorf("an idle room read 4 s ago rests %v more, want 1s (IdleRefresh 5 s)", got)
	}
	// Past IdleRefresh each is read once more.
	if got := cycles(20); got != rooms {
		t.Errorf("idle rooms read %d times in the next 2 s, want %d (once each)", got, rooms)
	}
	// A visitor comes to wait in r7: the next refresh reads it, and every
	// refresh after that, while someone waits.
	if _, _, err := q.Enter(ctx, "r7", "v"); err != nil {
		t.Fatal(err)
	}
	if got := cycles(1); got != 1 {
		t.Errorf("refresh after an entry read %d rooms, want 1 (r7)", got)
	}
	if q.RestLeft("r7") != 0 {
		t.Error("a room someone waits in is resting")
	}
	if got := cycles(10); got != 10 {
		t.Errorf("10 refreshes with someone waiting in r7 read %d rooms, want 10", got)
	}
	// A view older than IdleRefresh (the store failing) is not resting.
	c.t = c.t.Add(time.Minute)
	if q.RestLeft("r0") != 0 {
		t.Error("a room last read a minute ago is resting")
	}
}

// listGate is a store whose Rooms answers what the store held when it was
// called, but only once released: a refresh's list, read before a room
// was made.
type listGate struct {
	queue.Store
	listed  chan []string
	release chan struct{}
}

func (s *listGate) Rooms(ctx context.Context) ([]string, error) {
	rooms, err := s.Store.Rooms(ctx)
	s.listed <- rooms
	<-s.release
	return rooms, err
}

// TestRefreshKeepsRoomMadeMeanwhile: a room made (PutRoom) while a
// refresh read the store's list, before the room was in it, stays in the
// view: the refresh's list is older than the room's read. It used to drop
// it, stopping its admission loop, until the next refresh.
func TestRefreshKeepsRoomMadeMeanwhile(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
	store := &listGate{Store: memqueue.New(), listed: make(chan []string, 1), release: make(chan struct{})}
	q := queue.New(store, queue.Options{Now: c.now})
	done := make(chan error, 1)
	go func() { done <- refresh(ctx, q) }()
	if rooms := <-store.listed; len(rooms) != 0 {
		t.Fatalf("listed %v, want none", rooms)
	}
	c.t = c.t.Add(time.Millisecond)
	if err := q.PutRoom(ctx, "new", queue.DefaultSettings()); err != nil {
		t.Fatal(err)
	}
	close(store.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, ok := q.View("new"); !ok {
		t.Error("the refresh that listed the rooms before \"new\" was made dropped it from the view")
	}
}

// roomsCounter is a store that counts its Rooms calls.
type roomsCounter struct {
	queue.Store
	n atomic.Int64
}

func (s *roomsCounter) Rooms(ctx context.Context) ([]string, error) {
	s.n.Add(1)
	return s.Store.Rooms(ctx)
}

// TestRoomListGrowsApart: with more than a thousand rooms held, the store's
// room list is read once per Refresh per thousand rooms, not at every
// refresh; a room made elsewhere joins the view at the next list (or at
// once when the store wakes it: TestWakesReachOtherInstances).
func TestRoomListGrowsApart(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
	raw := memqueue.New()
	store := &roomsCounter{Store: raw}
	q := queue.New(store, queue.Options{Now: c.now})
	for i := range 2500 {
		if _, err := raw.PutRoom(ctx, fmt.Sprintf("r%d", i), queue.DefaultSettings(), queue.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	step := func() {
		t.Helper()
		c.t = c.t.Add(100 * time.Millisecond)
		if err := refresh(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	step() // lists and reads every room
	if rooms, _ := q.ViewRooms(); len(rooms) != 2500 {
		t.Fatalf("view holds %d rooms, want 2500", len(rooms))
	}
	before := store.n.Load()
	for range 10 {
		step()
	}
	if got := store.n.Load() - before; got != 5 {
		t.Errorf("10 refreshes over 2,500 rooms listed them %d times, want 5 (every 200 ms)", got)
	}
	if _, err := raw.PutRoom(ctx, "elsewhere", queue.DefaultSettings(), queue.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	step()
	step()
	if _, ok := q.View("elsewhere"); !ok {
		t.Error("a room made in the store was not in the view two refreshes later")
	}
}

// failingStats is a store whose Stats fails for one room while fail is set.
type failingStats struct {
	statsCounter
	room string
	fail atomic.Bool
}

func (s *failingStats) Stats(ctx context.Context, room string, now time.Time) (queue.Stats, error) {
	if room == s.room && s.fail.Load() {
		s.n.Add(1)
		return queue.Stats{}, queue.ErrUnavailable
	}
	return s.statsCounter.Stats(ctx, room, now)
}

// TestFailedReadIsRetried: a due room whose read fails is read again at
// every refresh until a read succeeds, then rests again.
func TestFailedReadIsRetried(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
	store := &failingStats{statsCounter: statsCounter{Store: memqueue.New()}, room: "r"}
	q := queue.New(store, queue.Options{Now: c.now, IdleRefresh: 5 * time.Second})
	if err := q.PutRoom(ctx, "r", queue.DefaultSettings()); err != nil {
		t.Fatal(err)
	}
	reads := func(fail bool) int64 {
		t.Helper()
		store.fail.Store(fail)
		before := store.n.Load()
		c.t = c.t.Add(100 * time.Millisecond)
		if err := refresh(ctx, q); err != nil { // Run logs a failed refresh
			t.Fatal(err)
		}
		return store.n.Load() - before
	}
	c.t = c.t.Add(5 * time.Second) // r is due
	for i := range 3 {
		if got := reads(true); got != 1 {
			t.Fatalf("refresh %d with r's reads failing read it %d times, want 1", i, got)
		}
	}
	if got := reads(false); got != 1 {
		t.Errorf("the refresh after the store came back read r %d times, want 1", got)
	}
	if got := reads(false); got != 0 {
		t.Errorf("the next refresh read r %d times, want 0: it rests again", got)
	}
}

// BenchmarkIdleRefresh is one refresh of an instance holding 10,000 rooms
// nobody waits in (memqueue, a clock 100 ms on per refresh): the work per
// refresh that scripts/bench-rooms.sh sees as CPU.
func BenchmarkIdleRefresh(b *testing.B) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
	q := queue.New(memqueue.New(), queue.Options{Now: c.now})
	for i := range 10_000 {
		if err := q.PutRoom(ctx, fmt.Sprintf("idle-%d", i), queue.DefaultSettings()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		c.t = c.t.Add(100 * time.Millisecond)
		if err := refresh(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
}
