package sale_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/booking"
	"usher/internal/booking/sqlitebooking"
	"usher/internal/hold"
	"usher/internal/hold/memhold"
	"usher/internal/mq"
	"usher/internal/mq/natsmq"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/sale"
	"usher/internal/testenv"
)

// rig is the embedded stack: memory queue and holds, SQLite, in-process
// NATS, with the consumer running.
type rig struct {
	svc     *sale.Service
	q       *queue.Queue
	catalog booking.Store
	holds   hold.Store
	broker  mq.Broker
	sched   booking.Schedule
	seats   []int64
	nats    *server.Server
	events  *recorder // what the service emitted
}

func newRig(t *testing.T, seats int) *rig {
	t.Helper()
	catalog, err := sqlitebooking.Open(context.Background(), filepath.Join(t.TempDir(), "booking.db"))
	if err != nil {
		t.Fatal(err)
	}
	return newRigWith(t, seats, catalog)
}

// newRigWith builds the rig on catalog, which it closes at the end.
func newRigWith(t *testing.T, seats int, catalog booking.Store) *rig {
	t.Helper()
	return newRigMetrics(t, seats, catalog, nil)
}

// newRigMetrics builds the rig with the booking metrics in reg (nil: none).
func newRigMetrics(t *testing.T, seats int, catalog booking.Store, reg prometheus.Registerer) *rig {
	t.Helper()
	return newRigConfig(t, seats, catalog, reg, nil)
}

// newRigConfig builds the rig with configure (nil: none) applied to the
// sale's configuration.
func newRigConfig(t testing.TB, seats int, catalog booking.Store, reg prometheus.Registerer, configure func(*sale.Config)) *rig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := natsmq.StartEmbedded(testenv.DataDir(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := natsmq.ConnectEmbedded(srv)
	if err != nil {
		t.Fatal(err)
	}
	// A loaded machine once took more than the default 5 s to answer a
	// watch on the embedded server; the bound here only guards a hang.
	broker, err := natsmq.Open(ctx, nc, natsmq.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{q: queue.New(memqueue.New(), queue.Options{}), catalog: catalog, holds: memhold.New(), broker: broker, nats: srv,
		events: &recorder{}}
	cfg := sale.Config{
		Catalog: catalog, Holds: r.holds, Broker: broker, Queue: r.q, Events: r.events,
		SnapshotEvery: time.Nanosecond, Workers: 2, MaxBatch: 16, RetryAfter: 50 * time.Millisecond,
		Registry: reg,
	}
	if configure != nil {
		configure(&cfg)
	}
	r.svc = sale.New(cfg)
	done := make(chan error, 1)
	go func() { done <- r.svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("consumer: %v", err)
		}
		nc.Close()
		srv.Shutdown()
		srv.WaitForShutdown()
		catalog.Close()
	})
	c, err := r.svc.CreateConcert(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	if r.sched, err = r.svc.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if r.seats, err = r.svc.AddSeats(ctx, r.sched.ID, sale.SeatLayout{Sections: []string{"A"}, Rows: 1, SeatsPerRow: seats, Price: 100}); err != nil {
		t.Fatal(err)
	}
	room := queue.DefaultSettings()
	room.MaxActive, room.AdmitRate = 100_000, 100_000
	if err := r.q.PutRoom(ctx, r.sched.Room, room); err != nil {
		t.Fatal(err)
	}
	return r
}

// wait polls the reservation until it is decided.
func (r *rig) wait(t *testing.T, visitor, id string) booking.Reservation {
	t.Helper()
	var res booking.Reservation
	testenv.Eventually(t, time.Minute, "reservation "+id+" decided", func() bool {
		var err error
		if res, err = r.svc.Reservation(context.Background(), visitor, id); err != nil {
			t.Fatal(err)
		}
		return res.Status != booking.Pending
	})
	return res
}

func TestReserveFlow(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, 10)
	s1, s2, s3 := r.seats[0], r.seats[1], r.seats[2]
	if e, _, err := r.q.Enter(ctx, r.sched.Room, "alice"); err != nil || e.Status != queue.Active {
		t.Fatalf("alice enters: %+v %v", e, err)
	}

	h, err := r.svc.Hold(ctx, r.sched.ID, "alice", []int64{s1, s2})
	if err != nil {
		t.Fatalf("alice holds: %v", err)
	}
	_, err = r.svc.Hold(ctx, r.sched.ID, "bob", []int64{s2, s3})
	var taken *hold.TakenError
	if !errors.As(err, &taken) || !slices.Equal(taken.Seats, []string{fmt.Sprint(s2)}) {
		t.Fatalf("bob holds a held seat: err = %v, want taken [%d]", err, s2)
	}
	m, err := r.svc.SeatMap(ctx, r.sched.ID)
	if err != nil || m.Seats[0].Status != booking.Held || m.Seats[2].Status != booking.Available {
		t.Fatalf("seat map while held: %+v %v", m, err)
	}

	res, created, err := r.svc.Reserve(ctx, "alice", r.sched.ID, []int64{s1, s2}, "k1")
	if err != nil || !created || res.Status != booking.Pending || !slices.Equal(res.HoldIDs, []string{h.ID}) {
		t.Fatalf("reserve = %+v, %v, %v; want a new pending reservation over hold %s", res, created, err, h.ID)
	}
	got := r.wait(t, "alice", res.ID)
	if got.Status != booking.Confirmed {
		t.Fatalf("decided %+v, want confirmed", got)
	}

	// SQL sold both seats to it; the hold ended; alice's slot is free.
	seats, err := r.catalog.Seats(ctx, r.sched.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range seats[:2] {
		if st.Status != booking.Sold || st.ReservationID != res.ID {
			t.Errorf("seat %d = %s of %q, want SOLD to %s", st.ID, st.Status, st.ReservationID, res.ID)
		}
	}
	waitFor(t, "hold consumed and slot freed", func() bool {
		_, herr := r.holds.Get(ctx, sale.Scope(r.sched.ID), h.ID, time.Now())
		e, _, _ := r.q.Status(ctx, r.sched.Room, "alice", 0, time.Time{})
		return errors.Is(herr, hold.ErrNotFound) && e.Status == queue.Gone
	})

	// The same key returns the same reservation, although its holds ended.
	again, created, err := r.svc.Reserve(ctx, "alice", r.sched.ID, []int64{s3}, "k1")
	if err != nil || created || again.ID != res.ID {
		t.Errorf("reserve with the same key = %+v, %v, %v; want %s, not created", again, created, err, res.ID)
	}
	// Sold seats cannot be held; seats not held cannot be reserved.
	if _, err := r.svc.Hold(ctx, r.sched.ID, "bob", []int64{s1}); !errors.Is(err, hold.ErrTaken) {
		t.Errorf("hold of a sold seat: err = %v, want taken", err)
	}
	var notHeld *sale.NotHeldError
	if _, _, err := r.svc.Reserve(ctx, "bob", r.sched.ID, []int64{s3}, "k2"); !errors.As(err, &notHeld) {
		t.Errorf("reserve without a hold: err = %v, want not held", err)
	}
	// Another visitor cannot read alice's reservation.
	if _, err := r.svc.Reservation(ctx, "bob", res.ID); !errors.Is(err, mq.ErrNotFound) {
		t.Errorf("bob reads alice's reservation: err = %v, want not found", err)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, 5)
	for _, tc := range []struct {
		seats []int64
		want  error
	}{
		{nil, sale.ErrInvalid},
		{[]int64{r.seats[0], r.seats[0]}, sale.ErrInvalid},
		{r.seats, sale.ErrInvalid}, // 5 > the limit of 4
		{[]int64{999_999}, sale.ErrSeatUnknown},
	} {
		if _, err := r.svc.Hold(ctx, r.sched.ID, "v", tc.seats); !errors.Is(err, tc.want) {
			t.Errorf("Hold(%v): err = %v, want %v", tc.seats, err, tc.want)
		}
	}
	if _, err := r.svc.Hold(ctx, 12345, "v", r.seats[:1]); !errors.Is(err, booking.ErrNotFound) {
		t.Errorf("Hold on an unknown schedule: err = %v, want not found", err)
	}
	for _, key := range []string{"", "has space", string(make([]byte, 129))} {
		if _, _, err := r.svc.Reserve(ctx, "v", r.sched.ID, r.seats[:1], key); !errors.Is(err, sale.ErrInvalid) {
			t.Errorf("Reserve with key %q: err = %v, want invalid", key, err)
		}
	}
}

// TestNoSeatSoldTwice races many visitors for a few hot seats through the
// whole flow, and also pushes conflicting reservations straight into the
// broker, as if the hold store had lost its holds: SQL must still sell every
// seat at most once, and the confirmed reservations must own exactly the
// sold seats.
func TestNoSeatSoldTwice(t *testing.T) {
	ctx := context.Background()
	const seats, visitors = 40, 120
	r := newRig(t, seats)
	var mu sync.Mutex
	var ids []string
	owner := map[string]string{}
	var wg sync.WaitGroup
	for v := range visitors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			visitor := fmt.Sprintf("v%d", v)
			rng := rand.New(rand.NewPCG(uint64(v), 7))
			want := []int64{r.seats[rng.IntN(8)]} // hot seats: the first 8
			if rng.IntN(2) == 0 {
				if other := r.seats[rng.IntN(seats)]; other != want[0] {
					want = append(want, other)
				}
			}
			if _, err := r.svc.Hold(ctx, r.sched.ID, visitor, want); err != nil {
				if !errors.Is(err, hold.ErrTaken) {
					t.Errorf("hold: %v", err)
				}
				return
			}
			res, _, err := r.svc.Reserve(ctx, visitor, r.sched.ID, want, "k")
			if err != nil {
				t.Errorf("reserve: %v", err)
				return
			}
			mu.Lock()
			ids, owner[res.ID] = append(ids, res.ID), visitor
			mu.Unlock()
		}()
	}
	// The lost-holds case: reservations that never held their seats.
	for i := range 30 {
		res := booking.Reservation{
			ID: fmt.Sprintf("rogue-%d", i), Visitor: fmt.Sprintf("rogue%d", i), ScheduleID: r.sched.ID,
			SeatIDs: []int64{r.seats[i%8]}, Status: booking.Pending, CreatedAt: time.Now().UTC(),
		}
		if _, _, err := r.broker.Submit(ctx, res, "k"); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		ids, owner[res.ID] = append(ids, res.ID), res.Visitor
		mu.Unlock()
	}
	wg.Wait()

	soldTo := map[int64]string{}
	confirmedSeats, rejected := 0, 0
	for _, id := range ids {
		res := r.wait(t, owner[id], id)
		if res.Status != booking.Confirmed {
			if res.Reason != booking.ReasonSeatTaken {
				t.Errorf("%s rejected for %q, want %s", id, res.Reason, booking.ReasonSeatTaken)
			}
			rejected++
			continue
		}
		for _, s := range res.SeatIDs {
			if prev, dup := soldTo[s]; dup {
				t.Fatalf("seat %d confirmed to %s and %s", s, prev, id)
			}
			soldTo[s] = id
			confirmedSeats++
		}
	}
	all, err := r.catalog.Seats(ctx, r.sched.ID)
	if err != nil {
		t.Fatal(err)
	}
	sold := 0
	for _, st := range all {
		if st.Status == booking.Sold {
			sold++
			if soldTo[st.ID] != st.ReservationID {
				t.Errorf("seat %d sold to %q in SQL, confirmed to %q", st.ID, st.ReservationID, soldTo[st.ID])
			}
		}
	}
	if rejected == 0 {
		t.Errorf("no reservation rejected: the race for 8 hot seats was not exercised")
	}
	if sold != confirmedSeats || sold == 0 {
		t.Errorf("SQL sold %d seats, confirmed reservations hold %d (want equal, > 0)", sold, confirmedSeats)
	}
	// Every hold ended with its reservation: none is left behind.
	waitFor(t, "no holds left", func() bool {
		held, err := r.holds.HeldSeats(ctx, sale.Scope(r.sched.ID), time.Now())
		return err == nil && len(held) == 0
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, time.Minute, what, cond)
}

// seatCounting is a catalog that counts the seat reads a seat-map rebuild
// makes.
type seatCounting struct {
	booking.Store
	mu    sync.Mutex
	reads int
}

func (c *seatCounting) Seats(ctx context.Context, scheduleID int64) ([]booking.Seat, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.Store.Seats(ctx, scheduleID)
}

func (c *seatCounting) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// TestHoldRebuildsNoMap: a hold checks its seats against the current seat
// map while it is younger than four rebuild periods, however due its
// rebuild is, so that a large map's rebuild never makes a hold wait; reads
// rebuild it, and a hold rebuilds a map older than that.
func TestHoldRebuildsNoMap(t *testing.T) {
	sqlite, err := sqlitebooking.Open(context.Background(), filepath.Join(t.TempDir(), "booking.db"))
	if err != nil {
		t.Fatal(err)
	}
	catalog := &seatCounting{Store: sqlite}
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	r := newRigConfig(t, 4, catalog, nil, func(c *sale.Config) {
		c.SnapshotEvery, c.InventoryEvery, c.Now = time.Second, sale.NoInventory, clock
	})
	ctx := context.Background()
	if _, err := r.svc.SeatMap(ctx, r.sched.ID); err != nil {
		t.Fatal(err)
	}
	built := catalog.count()
	advance(2 * time.Second) // a rebuild is due
	if _, err := r.svc.Hold(ctx, r.sched.ID, "a", r.seats[:1]); err != nil {
		t.Fatal(err)
	}
	if n := catalog.count(); n != built {
		t.Errorf("a hold with a rebuild due read the seats %d times, want none", n-built)
	}
	if _, err := r.svc.SeatMap(ctx, r.sched.ID); err != nil { // a read rebuilds it
		t.Fatal(err)
	}
	if n := catalog.count(); n != built+1 {
		t.Errorf("a read with a rebuild due read the seats %d times, want once", n-built)
	}
	advance(5 * time.Second) // older than four periods
	if _, err := r.svc.Hold(ctx, r.sched.ID, "b", r.seats[1:2]); err != nil {
		t.Fatal(err)
	}
	if n := catalog.count(); n != built+2 {
		t.Errorf("a hold on a map five periods old read the seats %d times, want once more", n-built-1)
	}
}
