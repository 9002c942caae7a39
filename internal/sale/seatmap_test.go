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

// stateCounting is a catalog that offers SeatStates, counts the full seat
// reads (seatCounting) and, once armed, holds either read until release
// is closed.
type stateCounting struct {
	seatCounting
	armed            atomic.Bool
	entered, release chan struct{}
}

func (c *stateCounting) stall() {
	if c.armed.Load() {
		c.entered <- struct{}{}
		<-c.release
	}
}

func (c *stateCounting) SeatStates(ctx context.Context, id int64) (int, []booking.SeatState, error) {
	c.stall()
	return c.Store.(booking.SeatStater).SeatStates(ctx, id)
}

func (c *stateCounting) Seats(ctx context.Context, id int64) ([]booking.Seat, error) {
	c.stall()
	return c.seatCounting.Seats(ctx, id)
}

// TestRebuildReadsStates: with a layout at hand and a catalog that offers
// SeatStates, a rebuild reads the taken seats, not every seat, and shows
// sales; seats added behind the instance's back (another instance) make
// it read them all again; and a hold completes while a rebuild is stalled
// in its read.
func TestRebuildReadsStates(t *testing.T) {
	ctx := context.Background()
	db, err := sqlitebooking.Open(ctx, filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	catalog := &stateCounting{seatCounting: seatCounting{Store: db}, entered: make(chan struct{}), release: make(chan struct{})}
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	advance := func() { now.Add(int64(2 * time.Second)) } // a rebuild is due, the map is recent
	r := newRigConfig(t, 10, catalog, nil, func(c *sale.Config) {
		c.SnapshotEvery, c.InventoryEvery = time.Second, sale.NoInventory
		c.Now = func() time.Time { return time.Unix(0, now.Load()) }
	})
	first, err := r.svc.SeatMap(ctx, r.sched.ID)
	if err != nil {
		t.Fatal(err)
	}
	reads := catalog.count()
	if _, err := r.svc.Hold(ctx, r.sched.ID, "alice", r.seats[:1]); err != nil {
		t.Fatal(err)
	}
	res, _, err := r.svc.Reserve(ctx, "alice", r.sched.ID, r.seats[:1], "k1")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.wait(t, "alice", res.ID); got.Status != booking.Confirmed {
		t.Fatalf("reservation %s, want confirmed", got.Status)
	}
	advance()
	m, err := r.svc.SeatMap(ctx, r.sched.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := catalog.count(); n != reads {
		t.Errorf("a rebuild with the layout unchanged read every seat %d times, want none", n-reads)
	}
	if m == first || len(m.Seats) != 10 || m.Seats[0].Status != booking.Sold || m.Seats[1].Status != booking.Available {
		t.Errorf("rebuilt map: new %v, %d seats, first two %s %s; want new, 10, SOLD AVAILABLE",
			m != first, len(m.Seats), m.Seats[0].Status, m.Seats[1].Status)
	}
	if first.Seats[0].Status != booking.Available {
		t.Errorf("the previous map changed: seat 1 %s", first.Seats[0].Status)
	}

	if _, err := db.AddSeats(ctx, r.sched.ID, []booking.SeatSpec{{Section: "Z", Row: "1", Number: 1}}); err != nil {
		t.Fatal(err)
	}
	advance()
	if m, err = r.svc.SeatMap(ctx, r.sched.ID); err != nil || len(m.Seats) != 11 {
		t.Fatalf("after another instance added a seat: %d seats (%v), want 11", len(m.Seats), err)
	}
	if n := catalog.count(); n != reads+1 {
		t.Errorf("seats added elsewhere: every seat read %d times, want once", n-reads)
	}

	// The rebuild stalls in its read; a hold does not wait for it (a hold
	// that did would hang here until the test's timeout).
	advance()
	catalog.armed.Store(true)
	var wg sync.WaitGroup
	wg.Go(func() { r.svc.SeatMapStatus(ctx, r.sched.ID) })
	<-catalog.entered
	catalog.armed.Store(false)
	if _, err := r.svc.Hold(ctx, r.sched.ID, "bob", r.seats[1:2]); err != nil {
		t.Errorf("hold during a stalled rebuild: %v", err)
	}
	close(catalog.release)
	wg.Wait()
	advance()
	if m, err = r.svc.SeatMap(ctx, r.sched.ID); err != nil || m.Seats[1].Status != booking.Held {
		t.Errorf("after the stalled rebuild: seat 2 %s (%v), want HELD", m.Seats[1].Status, err)
	}
}

// TestSeatsAddedDuringRebuild: seats added while a rebuild reads the
// schedule show in the next map, however long SnapshotEvery is: the
// rebuild that read before them leaves its map due.
func TestSeatsAddedDuringRebuild(t *testing.T) {
	ctx := context.Background()
	db, err := sqlitebooking.Open(ctx, filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	catalog := &readThenStall{stateCounting{seatCounting: seatCounting{Store: db}, entered: make(chan struct{}), release: make(chan struct{})}}
	r := newRigConfig(t, 10, catalog, nil, func(c *sale.Config) {
		c.SnapshotEvery, c.InventoryEvery = time.Hour, sale.NoInventory
	})
	catalog.armed.Store(true)
	built := make(chan *sale.SeatMap, 1)
	go func() {
		m, err := r.svc.SeatMap(ctx, r.sched.ID)
		if err != nil {
			t.Error(err)
		}
		built <- m
	}()
	<-catalog.entered // the rebuild reads the seats
	catalog.armed.Store(false)
	if _, err := r.svc.AddSeats(ctx, r.sched.ID, sale.SeatLayout{Sections: []string{"B"}, Rows: 1, SeatsPerRow: 5}); err != nil {
		t.Fatal(err)
	}
	close(catalog.release)
	if m := <-built; len(m.Seats) != 10 {
		t.Fatalf("the rebuild that read before the seats were added: %d seats, want 10", len(m.Seats))
	}
	if m, err := r.svc.SeatMap(ctx, r.sched.ID); err != nil || len(m.Seats) != 15 {
		t.Errorf("the next seat map: %d seats (%v), want 15", len(m.Seats), err)
	}
}

// readThenStall is stateCounting holding its reads after they read.
type readThenStall struct{ stateCounting }

func (c *readThenStall) SeatStates(ctx context.Context, id int64) (int, []booking.SeatState, error) {
	n, st, err := c.Store.(booking.SeatStater).SeatStates(ctx, id)
	c.stall()
	return n, st, err
}

func (c *readThenStall) Seats(ctx context.Context, id int64) ([]booking.Seat, error) {
	seats, err := c.seatCounting.Seats(ctx, id)
	c.stall()
	return seats, err
}
