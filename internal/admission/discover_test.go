package admission_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"usher/internal/admission"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/queue/redisqueue"
	"usher/internal/testenv"
)

// logs is a concurrency-safe log sink.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// start runs q's refresher and a scheduler until the test ends.
func start(t *testing.T, q *queue.Queue, log *slog.Logger) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { q.Run(ctx) })
	wg.Go(func() { admission.New(q, log).Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// fastRoom puts a paused room with a 10 ms interval and one visitor
// waiting, then opens it.
func fastRoom(t *testing.T, q *queue.Queue, room, visitor string) {
	t.Helper()
	ctx := context.Background()
	s := queue.DefaultSettings()
	s.State, s.Interval = queue.Paused, 10*time.Millisecond
	if err := q.PutRoom(ctx, room, s); err != nil {
		t.Error(err)
		return
	}
	if _, _, err := q.Enter(ctx, room, visitor); err != nil {
		t.Error(err)
		return
	}
	s.State = queue.Open
	if err := q.PutRoom(ctx, room, s); err != nil {
		t.Error(err)
	}
}

func admitted(q *queue.Queue, room, visitor string) bool {
	e, err := q.Renew(context.Background(), room, visitor)
	return err == nil && !e.IsZero()
}

// TestRoomsCreatedWhileRunning: rooms created from many goroutines while the
// scheduler runs each get a loop, from the queue's view alone.
func TestRoomsCreatedWhileRunning(t *testing.T) {
	q := queue.New(memqueue.New(), queue.Options{Refresh: 10 * time.Millisecond})
	start(t, q, slog.New(slog.DiscardHandler))
	const rooms = 32
	var wg sync.WaitGroup
	for i := range rooms {
		wg.Go(func() { fastRoom(t, q, fmt.Sprintf("r%02d", i), "v") })
	}
	wg.Wait()
	for i := range rooms {
		room := fmt.Sprintf("r%02d", i)
		testenv.Eventually(t, time.Minute, room+"'s visitor to be admitted", func() bool { return admitted(q, room, "v") })
	}
}

// TestLoopStopsWhenStoreLosesRoom: when the store loses a room (a flushed
// Redis), the view's next read of it (within IdleRefresh, the room being
// idle) drops it and its loop stops; when the room comes back, a new loop
// admits again.
func TestLoopStopsWhenStoreLosesRoom(t *testing.T) {
	c := testenv.Redis(t)
	prefix := testenv.RedisPrefix(t, c)
	q := queue.New(redisqueue.New(c, prefix), queue.Options{Refresh: 10 * time.Millisecond, IdleRefresh: time.Second})
	var out logs
	start(t, q, slog.New(slog.NewTextHandler(&out, nil)))

	fastRoom(t, q, "lost", "before")
	testenv.Eventually(t, time.Minute, "the first visitor to be admitted", func() bool { return admitted(q, "lost", "before") })
	if _, ok := q.View("other"); ok {
		t.Fatal("a view of a room never created")
	}

	testenv.DeleteKeys(t, c, prefix)
	testenv.Eventually(t, time.Minute, "the view to drop the lost room", func() bool { _, ok := q.View("lost"); return !ok })
	testenv.Eventually(t, time.Minute, "the loop to stop", func() bool {
		return strings.Contains(out.String(), `msg="room gone; its admission loop stops" room=lost`)
	})

	fastRoom(t, q, "lost", "after")
	testenv.Eventually(t, time.Minute, "a visitor of the recreated room to be admitted", func() bool { return admitted(q, "lost", "after") })
}
