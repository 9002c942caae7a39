package sale_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"usher/internal/booking"
	"usher/internal/booking/sqlitebooking"
	"usher/internal/hold/memhold"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/sale"
)

// slowSeats holds Seats until release is closed, once armed.
type slowSeats struct {
	booking.Store
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (s *slowSeats) Seats(ctx context.Context, id int64) ([]booking.Seat, error) {
	if s.armed.Load() {
		s.entered <- struct{}{}
		<-s.release
	}
	return s.Store.Seats(ctx, id)
}

// TestRebuildDoesNotBlock: while one caller rebuilds the seat map, the
// others take the last one at once if it is recent (less than 4
// SnapshotEvery old), and wait for the rebuild otherwise.
func TestRebuildDoesNotBlock(t *testing.T) {
	ctx := context.Background()
	db, err := sqlitebooking.Open(ctx, filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	catalog := &slowSeats{Store: db, entered: make(chan struct{}, 1), release: make(chan struct{})}
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	svc := sale.New(sale.Config{Catalog: catalog, Holds: memhold.New(), Queue: queue.New(memqueue.New(), queue.Options{}),
		SnapshotEvery: time.Second, Now: func() time.Time { return time.Unix(0, now.Load()) }})
	c, err := svc.CreateConcert(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := svc.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AddSeats(ctx, sch.ID, sale.SeatLayout{Sections: []string{"A"}, Rows: 1, SeatsPerRow: 3}); err != nil {
		t.Fatal(err)
	}
	first, err := svc.SeatMap(ctx, sch.ID)
	if err != nil {
		t.Fatal(err)
	}

	now.Add(int64(1500 * time.Millisecond)) // due for a rebuild
	catalog.armed.Store(true)
	var wg sync.WaitGroup
	wg.Go(func() { svc.SeatMap(ctx, sch.ID) }) // the rebuilder, held in Seats
	<-catalog.entered
	catalog.armed.Store(false)
	got := make(chan *sale.SeatMap, 1)
	go func() { m, _ := svc.SeatMap(ctx, sch.ID); got <- m }()
	select {
	case m := <-got:
		if m != first {
			t.Errorf("during a rebuild got a map built at %v, want the last one (%v)", m.BuiltAt, first.BuiltAt)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a caller waited for another's rebuild with a recent map at hand")
	}
	close(catalog.release)
	wg.Wait()

	// A map 5 s old (more than 4 SnapshotEvery) is not served during a
	// rebuild: the caller waits for a fresh one.
	now.Add(int64(5 * time.Second))
	catalog.release = make(chan struct{})
	catalog.armed.Store(true)
	wg.Go(func() { svc.SeatMap(ctx, sch.ID) })
	<-catalog.entered
	catalog.armed.Store(false)
	go func() { m, _ := svc.SeatMap(ctx, sch.ID); got <- m }()
	select {
	case m := <-got:
		t.Errorf("during a rebuild got a map built at %v while the last one is 5 s old; want to wait", m.BuiltAt)
	case <-time.After(100 * time.Millisecond):
	}
	close(catalog.release)
	wg.Wait()
	if m := <-got; !m.BuiltAt.Equal(time.Unix(0, now.Load())) {
		t.Errorf("after the rebuild: a map built at %v, want now", m.BuiltAt)
	}
}

// TestSeatsAddedShowAtOnce: seats added through the service show in the
// next seat map of this instance, however long SnapshotEvery is.
func TestSeatsAddedShowAtOnce(t *testing.T) {
	db, err := sqlitebooking.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	r := newRigConfig(t, 10, db, nil, func(c *sale.Config) { c.SnapshotEvery = time.Hour })
	ctx := context.Background()
	m, err := r.svc.SeatMap(ctx, r.sched.ID)
	if err != nil || len(m.Seats) != 10 {
		t.Fatalf("seat map before: %v seats, %v", len(m.Seats), err)
	}
	if _, err := r.svc.AddSeats(ctx, r.sched.ID, sale.SeatLayout{Sections: []string{"B"}, Rows: 1, SeatsPerRow: 5}); err != nil {
		t.Fatal(err)
	}
	if m, err = r.svc.SeatMap(ctx, r.sched.ID); err != nil || len(m.Seats) != 15 {
		t.Errorf("seat map after adding 5 seats: %d seats (%v), want 15", len(m.Seats), err)
	}
}
