// Package eventtest is the conformance suite of the event publishers
// (natsevent, kafkaevent): what Emit, Offer and Run promise, checked
// against the events the transport holds afterwards. Each backend's tests
// call Run with a Backend of the test's own (a fresh stream or topic).
package eventtest

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/booking"
	"usher/internal/event"
	"usher/internal/testenv"
)

// Publisher is an event publisher under test.
type Publisher interface {
	event.Offerer
	Run(ctx context.Context) error
}

// Backend is one transport, fresh for the test.
type Backend struct {
	// NewPublisher returns a publisher of at most buffer waiting events,
	// registering usher_events_published_total and
	// usher_events_dropped_total with reg. Run it or not: the suite does.
	NewPublisher func(tb testing.TB, buffer int, reg prometheus.Registerer) Publisher
	// Published returns every event the transport holds, each room's in
	// the order the transport keeps them.
	Published func(tb testing.TB) []event.Event
}

// Run runs the suite; newBackend is called once per test.
func Run(t *testing.T, newBackend func(testing.TB) Backend) {
	t.Run("Publish", func(t *testing.T) { t.Parallel(); testPublish(t, newBackend(t)) })
	t.Run("BufferFull", func(t *testing.T) { t.Parallel(); testBufferFull(t, newBackend(t)) })
	t.Run("RoomOrder", func(t *testing.T) { t.Parallel(); testRoomOrder(t, newBackend(t)) })
	t.Run("StopPublishesBuffer", func(t *testing.T) { t.Parallel(); testStop(t, newBackend(t)) })
}

// Event returns a test event of room-<i%3>.
func Event(i int) event.Event {
	return event.New(event.Entered, fmt.Sprintf("room-%d", i%3), fmt.Sprintf("v%d", i),
		time.Date(2026, 12, 1, 20, 0, 0, i*1000, time.UTC), event.Data{ETAMS: int64(1000 + i)})
}

// run runs p until the test ends (or stop is called) and returns stop,
// which waits for Run and reports its error.
func run(t *testing.T, p Publisher) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run = %v, want nil", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// testPublish: events emitted from many goroutines at once (-race) are
// each published once, unchanged, and counted.
func testPublish(t *testing.T, b Backend) {
	reg := prometheus.NewPedanticRegistry()
	p := b.NewPublisher(t, 0, reg)
	stop := run(t, p)
	const emitters, each = 8, 50
	var wg sync.WaitGroup
	var mu sync.Mutex
	want := map[string]event.Event{}
	for g := range emitters {
		wg.Go(func() {
			for i := range each {
				e := Event(g*each + i)
				mu.Lock()
				want[e.ID] = e
				mu.Unlock()
				p.Emit(e)
			}
		})
	}
	wg.Wait()
	testenv.Eventually(t, 30*time.Second, "every event published", func() bool { return len(b.Published(t)) >= emitters*each })
	// The transport stores an event before its acknowledgement reaches the
	// publisher, which counts it then.
	testenv.Eventually(t, 30*time.Second, "every event counted as published", func() bool {
		return Counter(t, reg, "usher_events_published_total", "source", "instance") >= emitters*each
	})
	stop()
	for _, got := range b.Published(t) {
		w, ok := want[got.ID]
		if !ok {
			t.Errorf("unexpected or repeated event %+v", got)
			continue
		}
		delete(want, got.ID)
		if !got.At.Equal(w.At) {
			t.Errorf("event %s at %v, want %v", w.ID, got.At, w.At)
		}
		got.At = w.At
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("event %s (-emitted +published):\n%s", w.ID, diff)
		}
	}
	if len(want) != 0 {
		t.Errorf("%d events never published", len(want))
	}
	if got := Counter(t, reg, "usher_events_published_total", "source", "instance"); got != emitters*each {
		t.Errorf("published = %v, want %d", got, emitters*each)
	}
	if got := Counter(t, reg, "usher_events_dropped_total", "reason", "buffer_full"); got != 0 {
		t.Errorf("dropped (buffer_full) = %v, want 0", got)
	}
}

// testBufferFull: with the buffer full Emit drops and counts, never
// waits; Offer refuses without counting; what the buffer held is
// published once Run starts.
func testBufferFull(t *testing.T, b Backend) {
	reg := prometheus.NewPedanticRegistry()
	p := b.NewPublisher(t, 4, reg)
	for i := range 10 {
		p.Emit(Event(i)) // no Run yet: nothing drains the buffer
	}
	if got := Counter(t, reg, "usher_events_dropped_total", "reason", "buffer_full"); got != 6 {
		t.Errorf("dropped (buffer_full) = %v, want 6", got)
	}
	if p.Offer(Event(10)) {
		t.Error("Offer took an event with the buffer full")
	}
	if got := Counter(t, reg, "usher_events_dropped_total", "reason", "buffer_full"); got != 6 {
		t.Errorf("dropped (buffer_full) = %v after a refused Offer, want 6", got)
	}
	stop := run(t, p)
	testenv.Eventually(t, 30*time.Second, "the 4 buffered events counted as published", func() bool {
		return Counter(t, reg, "usher_events_published_total", "source", "instance") == 4
	})
	stop()
	var got []string
	for _, e := range b.Published(t) {
		got = append(got, e.Visitor)
	}
	slices.Sort(got)
	if want := []string{"v0", "v1", "v2", "v3"}; !cmp.Equal(got, want) {
		t.Errorf("published %v, want %v", got, want)
	}
}

// testRoomOrder: one goroutine's events of a room are published in the
// order it emitted them.
func testRoomOrder(t *testing.T, b Backend) {
	p := b.NewPublisher(t, 0, prometheus.NewPedanticRegistry())
	const n = 600
	for i := range n {
		p.Emit(Event(i))
	}
	stop := run(t, p)
	testenv.Eventually(t, 30*time.Second, "every event published", func() bool { return len(b.Published(t)) >= n })
	stop()
	last := map[string]int64{}
	for _, e := range b.Published(t) {
		at := e.At.UnixNano()
		if at < last[e.Room] {
			t.Fatalf("room %s: event of %v after one of %v", e.Room, e.At, time.Unix(0, last[e.Room]).UTC())
		}
		last[e.Room] = at
	}
	if len(last) != 3 {
		t.Errorf("events of %d rooms, want 3", len(last))
	}
}

// testStop: events still in the buffer when Run's context ends are
// published before Run returns.
func testStop(t *testing.T, b Backend) {
	reg := prometheus.NewPedanticRegistry()
	p := b.NewPublisher(t, 0, reg)
	const n = 50
	for i := range n {
		p.Emit(Event(i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if got := Counter(t, reg, "usher_events_published_total", "source", "instance"); got != n {
		t.Errorf("published = %v when Run returned, want %d", got, n)
	}
	if got := len(b.Published(t)); got != n {
		t.Errorf("%d events published, want %d", got, n)
	}
}

// Counter reads a counter of reg by one label.
func Counter(tb testing.TB, reg prometheus.Gatherer, name, label, value string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	tb.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}

// Bench measures a publisher's throughput: b.N events offered (waiting
// while the buffer is full, as a counted producer does) and acknowledged
// by the transport. It reports events/s.
func Bench(b *testing.B, newBackend func(testing.TB) Backend) {
	be := newBackend(b)
	reg := prometheus.NewPedanticRegistry()
	p := be.NewPublisher(b, 0, reg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	evs := make([]event.Event, 1024)
	for i := range evs {
		evs[i] = Event(i)
	}
	b.ResetTimer()
	for i := range b.N {
		e := evs[i%len(evs)]
		e.ID = event.NewID()
		for !p.Offer(e) {
			runtime.Gosched()
		}
	}
	for Counter(b, reg, "usher_events_published_total", "source", "instance") < float64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// Sell makes a schedule of n seats and decides n+2 reservations (ids
// starting with tag): n confirmed (one seat each) and 2 rejected. It
// returns the decisions.
func Sell(tb testing.TB, s booking.Store, tag string, n int) []booking.Reservation {
	tb.Helper()
	ctx := context.Background()
	c, err := s.CreateConcert(ctx, "c")
	if err != nil {
		tb.Fatal(err)
	}
	sch, err := s.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID, StartsAt: time.Now()})
	if err != nil {
		tb.Fatal(err)
	}
	specs := make([]booking.SeatSpec, n)
	for i := range specs {
		specs[i] = booking.SeatSpec{Section: "A", Row: "1", Number: i + 1, Price: 1000}
	}
	ids, err := s.AddSeats(ctx, sch.ID, specs)
	if err != nil {
		tb.Fatal(err)
	}
	var rs []booking.Reservation
	for i, id := range ids {
		rs = append(rs, booking.Reservation{ID: fmt.Sprintf("%s-r%d", tag, i), Visitor: fmt.Sprintf("v%d", i), ScheduleID: sch.ID, SeatIDs: []int64{id}})
	}
	rs = append(rs,
		booking.Reservation{ID: tag + "-late-1", Visitor: "x", ScheduleID: sch.ID, SeatIDs: []int64{ids[0]}},
		booking.Reservation{ID: tag + "-late-2", Visitor: "y", ScheduleID: sch.ID, SeatIDs: []int64{ids[1]}})
	var out []booking.Reservation
	for len(rs) > 0 { // batches of 7, as the consumer would
		b := rs[:min(7, len(rs))]
		rs = rs[len(b):]
		got, err := s.Decide(ctx, b)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, got...)
	}
	return out
}
