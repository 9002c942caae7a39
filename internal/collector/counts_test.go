package collector_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/analytics"
	"usher/internal/event/natsevent"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/testenv"
)

// testBurstCounted is issue 22's check, end to end: entries as fast as
// many goroutines make them, through a queue whose counted events go
// through a Publisher into the event stream and the collector into
// analytics; the analytics' arrivals equal the store's count exactly.
// buffer is the publisher's buffer: 1 forces the full-buffer path (the
// counts wait for the next flush), the default takes them at once.
func testBurstCounted(t *testing.T, store analytics.Store, buffer int) {
	ctx := context.Background()
	p := prefix()
	nc := embedded(t)(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := natsevent.EnsureStream(ctx, js, p, 1); err != nil {
		t.Fatal(err)
	}
	pub, err := natsevent.NewPublisher(nc, natsevent.PublisherOptions{
		Prefix: p, Buffer: buffer, Metrics: natsevent.NewMetrics(prometheus.NewRegistry()),
	})
	if err != nil {
		t.Fatal(err)
	}
	q := queue.New(memqueue.New(), queue.Options{Events: pub, CountEvery: time.Millisecond})
	rooms := []string{"burst-a", "burst-b", "burst-c"}
	s := queue.DefaultSettings()
	s.State = queue.Paused
	for _, r := range rooms {
		if err := q.PutRoom(ctx, r, s); err != nil {
			t.Fatal(err)
		}
	}
	pctx, stopPub := context.WithCancel(ctx)
	pubDone := make(chan error, 1)
	go func() { pubDone <- pub.Run(pctx) }()
	cctx, stopCounts := context.WithCancel(ctx)
	countsDone := make(chan error, 1)
	go func() { countsDone <- q.RunCounts(cctx) }()

	const workers, each = 32, 150
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, _, err := q.Enter(ctx, rooms[(w+i)%len(rooms)], fmt.Sprintf("v%d-%d", w, i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// Shutdown as usher serve does it: the counts' last flush, then the
	// publisher drains.
	stopCounts()
	<-countsDone
	q.DrainCounts(ctx)
	stopPub()
	<-pubDone

	want := truth{}
	for _, r := range rooms {
		v, err := q.Room(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		want[r] = analytics.Counts{Arrivals: v.Waiting}
	}
	if total(want) != workers*each {
		t.Fatalf("setup: %d waiting in all, want %d", total(want), workers*each)
	}
	a := analytics.New(store, analytics.Options{})
	start(t, nc, a, p, nil)
	var got truth
	testenv.Eventually(t, 30*time.Second, "the analytics' arrivals equal the store's count", func() bool {
		got = counted(t, a, want)
		return total(got) >= total(want)
	})
	for _, r := range rooms {
		if got[r].Arrivals != want[r].Arrivals {
			t.Errorf("room %s: %d arrivals counted, want the store's %d", r, got[r].Arrivals, want[r].Arrivals)
		}
	}
}

func TestBurstCountedSQLite(t *testing.T) {
	t.Run("buffer=1", func(t *testing.T) { testBurstCounted(t, sqliteStore(t), 1) })
	t.Run("buffer=default", func(t *testing.T) { testBurstCounted(t, sqliteStore(t), 0) })
}

func TestBurstCountedPostgres(t *testing.T) {
	testBurstCounted(t, pgStore(t), 1)
}
