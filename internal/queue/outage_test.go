package queue_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
)

// lockedBuffer is a log sink safe for the Run goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// downStore is a store that fails every list and read while down is set,
// as a Redis outage does, counting the failed lists.
type downStore struct {
	queue.Store
	down  atomic.Bool
	lists atomic.Int64
}

func (s *downStore) Rooms(ctx context.Context) ([]string, error) {
	if s.down.Load() {
		s.lists.Add(1)
		return nil, queue.ErrUnavailable
	}
	return s.Store.Rooms(ctx)
}

func (s *downStore) Stats(ctx context.Context, room string, now time.Time) (queue.Stats, error) {
	if s.down.Load() {
		return queue.Stats{}, queue.ErrUnavailable
	}
	return s.Store.Stats(ctx, room, now)
}

// TestRefreshOutageLogsOnce: a store outage during which the refresh loop
// fails many times logs one warning, and one summary when it ends.
func TestRefreshOutageLogsOnce(t *testing.T) {
	var logs lockedBuffer
	store := &downStore{Store: memqueue.New()}
	q := queue.New(store, queue.Options{Refresh: time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := q.PutRoom(ctx, "r", queue.DefaultSettings()); err != nil {
		t.Fatal(err)
	}
	store.down.Store(true)
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx) }()
	waitFor(t, "50 failed refreshes", func() bool { return store.lists.Load() >= 50 })
	store.down.Store(false)
	waitFor(t, "the outage's summary", func() bool { return strings.Contains(logs.String(), "recovered\"") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if n := strings.Count(out, "refresh room views"); n != 2 {
		t.Errorf("an outage of %d failed refreshes logged %d lines naming the refresh, want 2 (its start and its end):\n%s", store.lists.Load(), n, out)
	}
	if !strings.Contains(out, "level=WARN msg=\"refresh room views failing") || !strings.Contains(out, "failures=") {
		t.Errorf("want a warning when the outage starts and a summary with its failures:\n%s", out)
	}
}

func TestOutageLog(t *testing.T) {
	var logs bytes.Buffer
	o := queue.NewOutageLog(slog.New(slog.NewTextHandler(&logs, nil)), "step", "room", "r")
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	o.Observe(nil, t0)
	for i := range 120 {
		o.Observe(errors.New("down"), t0.Add(time.Duration(i)*100*time.Millisecond))
	}
	o.Observe(nil, t0.Add(12*time.Second))
	o.Observe(nil, t0.Add(13*time.Second))
	o.Observe(errors.New("down again"), t0.Add(14*time.Second))
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	want := []string{
		`level=WARN msg="step failing (retried quietly until it recovers)" room=r err=down`,
		`level=INFO msg="step recovered" room=r failures=120 outage=12s last_err=down`,
		`level=WARN msg="step failing (retried quietly until it recovers)" room=r err="down again"`,
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), logs.String())
	}
	for i, l := range lines {
		if _, rest, _ := strings.Cut(l, " "); rest != want[i] {
			t.Errorf("line %d = %q, want %q", i, rest, want[i])
		}
	}
}

// waitFor polls cond until it holds, failing the test after a long while.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 3000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
