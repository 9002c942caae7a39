// Package mqtest is the conformance suite every mq.Broker backend runs. It
// pins what the rest of usher relies on: Submit records a pending reservation
// that Get and Watch show until a consumer decides it; one reservation per
// visitor and idempotency key, also under concurrent submissions; a failed
// batch comes back after RetryAfter; a batch held by a consumer that stopped
// is delivered to another; Consume never runs more than Workers handlers at
// once nor hands more than MaxBatch reservations to one; no reservation is
// lost; Backlog counts the undecided reservations; the errors
// (mq.ErrNotFound). Its handler stands in for booking.Store.Decide (db).
//
// The suite asserts outcomes, not timings. It waits up to a minute (wait)
// for reservations to be decided, so a backend must redeliver a batch whose
// consumer stopped well within that (give it a short ack timeout).
package mqtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"usher/internal/booking"
	"usher/internal/mq"
	"usher/internal/testenv"
)

// NewBroker returns an empty broker that no other test uses, and cleans it
// up when tb ends.
type NewBroker func(tb testing.TB) mq.Broker

// wait bounds every wait for an outcome; it is a liveness bound, not a
// timing assertion.
const wait = time.Minute

var t0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

// Run runs the suite. Subtests run in parallel, one broker each.
func Run(t *testing.T, newBroker NewBroker) {
	t.Run("Lifecycle", func(t *testing.T) { t.Parallel(); testLifecycle(t, newBroker(t)) })
	t.Run("NotFound", func(t *testing.T) { t.Parallel(); testNotFound(t, newBroker(t)) })
	t.Run("Watch", func(t *testing.T) { t.Parallel(); testWatch(t, newBroker(t)) })
	t.Run("Idempotent", func(t *testing.T) { t.Parallel(); testIdempotent(t, newBroker(t)) })
	t.Run("IdempotentConcurrent", func(t *testing.T) { t.Parallel(); testIdempotentConcurrent(t, newBroker(t)) })
	t.Run("HandlerError", func(t *testing.T) { t.Parallel(); testHandlerError(t, newBroker(t)) })
	t.Run("ConsumerStopped", func(t *testing.T) { t.Parallel(); testConsumerStopped(t, newBroker(t)) })
	t.Run("Bounds", func(t *testing.T) { t.Parallel(); testBounds(t, newBroker(t)) })
	t.Run("Backlog", func(t *testing.T) { t.Parallel(); testBacklog(t, newBroker(t)) })
}

// reservation returns a pending reservation; one without seats is rejected
// by the test database, the others are confirmed.
func reservation(id, visitor string, seats ...int64) booking.Reservation {
	return booking.Reservation{
		ID:         id,
		Visitor:    visitor,
		ScheduleID: 7,
		SeatIDs:    seats,
		Status:     booking.Pending,
		CreatedAt:  t0,
	}
}

func isDecided(r booking.Reservation) bool {
	return r.Status == booking.Confirmed || r.Status == booking.Rejected
}

// db stands in for booking.Store.Decide: idempotent (a reservation decided
// again returns the stored decision), and it records what happened (how
// often each reservation's effect was applied) so the tests can check it.
type db struct {
	t  testing.TB
	mu sync.Mutex
	// submitted is what Submit created: the only reservations a handler
	// may see, with exactly this content.
	submitted map[string]booking.Reservation
	decisions map[string]booking.Reservation
	applied   map[string]int // first decisions: the effect, e.g. seats sold
	delivered map[string]int // times passed to a handler
	failLeft  int            // calls still to fail (a database that is down)
	failed    int
}

func newDB(t testing.TB) *db {
	return &db{
		t:         t,
		submitted: map[string]booking.Reservation{},
		decisions: map[string]booking.Reservation{},
		applied:   map[string]int{},
		delivered: map[string]int{},
	}
}

// submit submits r and registers it as created when it was: before the
// call, since a running consumer may see it before Submit returns. It may
// run in any goroutine: a failure is reported, and shows again as a
// reservation that is never decided.
func (d *db) submit(ctx context.Context, b mq.Broker, r booking.Reservation, key string) (booking.Reservation, bool) {
	d.t.Helper()
	d.mu.Lock()
	_, known := d.submitted[r.ID]
	if !known {
		d.submitted[r.ID] = r
	}
	d.mu.Unlock()
	got, created, err := b.Submit(ctx, r, key)
	if err != nil {
		d.t.Errorf("Submit(%s, %q): %v", r.ID, key, err)
	}
	if !created && !known {
		d.mu.Lock()
		delete(d.submitted, r.ID)
		d.mu.Unlock()
	}
	return got, created
}

// decide is the mq.Handler.
func (d *db) decide(ctx context.Context, batch []booking.Reservation) ([]booking.Reservation, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range batch {
		d.delivered[r.ID]++
		want, ok := d.submitted[r.ID]
		if !ok {
			d.t.Errorf("handler got %q, which no Submit created", r.ID)
			continue
		}
		if diff := cmp.Diff(want, r); diff != "" {
			d.t.Errorf("handler got reservation %s unlike the submitted one (-submitted +got):\n%s", r.ID, diff)
		}
	}
	if d.failLeft > 0 {
		d.failLeft--
		d.failed++
		return nil, errors.New("database down")
	}
	out := make([]booking.Reservation, len(batch))
	for i, r := range batch {
		dec, ok := d.decisions[r.ID]
		if !ok {
			dec = r
			dec.Status, dec.DecidedAt = booking.Confirmed, t0.Add(time.Duration(len(d.decisions)+1)*time.Second)
			if len(r.SeatIDs) == 0 {
				dec.Status, dec.Reason = booking.Rejected, booking.ReasonSeatUnknown
			}
			d.decisions[r.ID] = dec
			d.applied[r.ID]++
		}
		out[i] = dec
	}
	return out, nil
}

func (d *db) decision(id string) (booking.Reservation, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.decisions[id]
	return r, ok
}

// check asserts that every submitted reservation was applied exactly once
// and that the broker shows the database's decision.
func (d *db) check(ctx context.Context, b mq.Broker) {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for id := range d.submitted {
		if n := d.applied[id]; n != 1 {
			d.t.Errorf("reservation %s applied %d times, want 1", id, n)
		}
		got, err := b.Get(ctx, id)
		if err != nil {
			d.t.Errorf("Get(%s): %v", id, err)
			continue
		}
		if diff := cmp.Diff(d.decisions[id], got); diff != "" {
			d.t.Errorf("Get(%s) differs from the database's decision (-db +got):\n%s", id, diff)
		}
	}
}

// consume runs b.Consume until the returned stop is called (or the test
// ends) and checks that it returns nil.
func consume(t testing.TB, b mq.Broker, o mq.ConsumeOptions, h mq.Handler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Consume(ctx, o, h) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Consume returned %v after ctx ended, want nil", err)
				}
			case <-time.After(wait):
				t.Errorf("Consume did not return %v after ctx ended", wait)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitDecided polls Get until every id is decided.
func waitDecided(t testing.TB, b mq.Broker, ids []string) {
	t.Helper()
	ctx := context.Background()
	left := map[string]bool{}
	for _, id := range ids {
		left[id] = true
	}
	deadline := time.Now().Add(wait)
	for len(left) > 0 {
		for id := range left {
			r, err := b.Get(ctx, id)
			if err != nil {
				t.Fatalf("Get(%s): %v", id, err)
			}
			if isDecided(r) {
				delete(left, id)
			} else if r.Status != booking.Pending {
				t.Fatalf("Get(%s).Status = %q, want pending, confirmed or rejected", id, r.Status)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d reservations still pending after %v", len(left), len(ids), wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// recv receives from ch, failing the test if nothing comes within wait.
func recv(t testing.TB, ch <-chan booking.Reservation) (booking.Reservation, bool) {
	t.Helper()
	select {
	case r, ok := <-ch:
		return r, ok
	case <-time.After(wait):
		t.Fatalf("Watch sent nothing and did not close in %v", wait)
		return booking.Reservation{}, false
	}
}

func testLifecycle(t *testing.T, b mq.Broker) {
	ctx := context.Background()
	d := newDB(t)
	r1 := reservation("r1", "alice", 11, 12)
	got, created := d.submit(ctx, b, r1, "k1")
	if !created {
		t.Errorf("Submit(r1) created = false, want true")
	}
	if diff := cmp.Diff(r1, got); diff != "" {
		t.Errorf("Submit(r1) returned (-want +got):\n%s", diff)
	}
	if got, err := b.Get(ctx, "r1"); err != nil || !cmp.Equal(got, r1) {
		t.Errorf("Get(r1) = %+v, %v; want %+v (pending)", got, err, r1)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := b.Watch(wctx, "r1")
	if err != nil {
		t.Fatalf("Watch(r1): %v", err)
	}
	if first, ok := recv(t, w); !ok || !cmp.Equal(first, r1) {
		t.Errorf("Watch(r1) first sent %+v (open %v), want the pending reservation", first, ok)
	}
	r2 := reservation("r2", "bob") // no seats: rejected
	d.submit(ctx, b, r2, "k1")

	stop := consume(t, b, mq.ConsumeOptions{Workers: 2, MaxBatch: 10, RetryAfter: 100 * time.Millisecond}, d.decide)
	var last booking.Reservation
	for {
		r, ok := recv(t, w)
		if !ok {
			break
		}
		if isDecided(last) {
			t.Errorf("Watch(r1) sent %+v after the decision", r)
		}
		if r.Status != booking.Pending && !isDecided(r) {
			t.Errorf("Watch(r1) sent status %q", r.Status)
		}
		last = r
	}
	if want, _ := d.decision("r1"); !cmp.Equal(last, want) || last.Status != booking.Confirmed {
		t.Errorf("Watch(r1) last sent %+v before closing, want the confirmation %+v", last, want)
	}
	waitDecided(t, b, []string{"r1", "r2"})
	stop()
	d.check(ctx, b)
	if got, _ := b.Get(ctx, "r2"); got.Status != booking.Rejected || got.Reason != booking.ReasonSeatUnknown {
		t.Errorf("Get(r2) = %+v, want rejected, %s", got, booking.ReasonSeatUnknown)
	}
}

func testNotFound(t *testing.T, b mq.Broker) {
	ctx := context.Background()
	for _, id := range []string{"missing", "", "a b.c*>"} {
		if _, err := b.Get(ctx, id); !errors.Is(err, mq.ErrNotFound) {
			t.Errorf("Get(%q) err = %v, want ErrNotFound", id, err)
		}
		if _, err := b.Watch(ctx, id); !errors.Is(err, mq.ErrNotFound) {
			t.Errorf("Watch(%q) err = %v, want ErrNotFound", id, err)
		}
	}
}

func testWatch(t *testing.T, b mq.Broker) {
	ctx := context.Background()
	d := newDB(t)
	// Ids and visitors are arbitrary strings.
	odd := reservation("odd id/é.*>", "visitor with spaces.*>", 3)
	d.submit(ctx, b, odd, "key/é with spaces")
	plain := reservation("plain", "carol", 4)
	d.submit(ctx, b, plain, "k")

	// A cancelled watch closes its channel without a decision.
	wctx, cancel := context.WithCancel(ctx)
	w, err := b.Watch(wctx, odd.ID)
	if err != nil {
		t.Fatalf("Watch(%q): %v", odd.ID, err)
	}
	if r, ok := recv(t, w); !ok || !cmp.Equal(r, odd) {
		t.Errorf("Watch(%q) first sent %+v (open %v), want the pending reservation", odd.ID, r, ok)
	}
	cancel()
	for {
		r, ok := recv(t, w)
		if !ok {
			break
		}
		if r.Status != booking.Pending {
			t.Errorf("cancelled watch sent %+v", r)
		}
	}

	stop := consume(t, b, mq.ConsumeOptions{Workers: 1, MaxBatch: 1, RetryAfter: 100 * time.Millisecond}, d.decide)
	waitDecided(t, b, []string{odd.ID, plain.ID})
	stop()
	d.check(ctx, b)

	// Watching a decided reservation sends the decision and closes.
	w, err = b.Watch(ctx, odd.ID)
	if err != nil {
		t.Fatalf("Watch(%q) after the decision: %v", odd.ID, err)
	}
	want, _ := d.decision(odd.ID)
	if r, ok := recv(t, w); !ok || !cmp.Equal(r, want) {
		t.Errorf("Watch(decided) sent %+v (open %v), want %+v", r, ok, want)
	}
	if r, ok := recv(t, w); ok {
		t.Errorf("Watch(decided) sent %+v after the decision, want the channel closed", r)
	}
}

func testIdempotent(t *testing.T, b mq.Broker) {
	ctx := context.Background()
	d := newDB(t)
	a := reservation("a", "dave", 1)
	if _, created := d.submit(ctx, b, a, "k"); !created {
		t.Fatalf("first Submit created = false")
	}
	// Same visitor and key, different reservation: the first one.
	got, created := d.submit(ctx, b, reservation("a2", "dave", 2, 3), "k")
	if created || !cmp.Equal(got, a) {
		t.Errorf("Submit(same visitor, same key) = %+v, %v; want %+v, false", got, created, a)
	}
	if _, err := b.Get(ctx, "a2"); !errors.Is(err, mq.ErrNotFound) {
		t.Errorf("Get(a2) err = %v, want ErrNotFound: the duplicate must not be recorded", err)
	}
	// Another visitor with the same key, the same visitor with another key,
	// and pairs whose concatenations are equal are all new reservations.
	for _, c := range []struct {
		r   booking.Reservation
		key string
	}{
		{reservation("b", "erin", 4), "k"},
		{reservation("c", "dave", 5), "k2"},
		{reservation("d", "dav", 6), "ek"},
	} {
		if got, created := d.submit(ctx, b, c.r, c.key); !created || !cmp.Equal(got, c.r) {
			t.Errorf("Submit(%s, %s, %q) = %+v, %v; want a new reservation", c.r.ID, c.r.Visitor, c.key, got, created)
		}
	}

	stop := consume(t, b, mq.ConsumeOptions{Workers: 2, MaxBatch: 3, RetryAfter: 100 * time.Millisecond}, d.decide)
	waitDecided(t, b, []string{"a", "b", "c", "d"})
	stop()
	d.check(ctx, b)

	// After the decision, a retry still returns the first reservation.
	got, created = d.submit(ctx, b, reservation("a3", "dave", 9), "k")
	if created || got.ID != "a" {
		t.Errorf("Submit after the decision = %+v, %v; want reservation a, false", got, created)
	}
	if dec, _ := d.decision("a"); got.Status != booking.Pending && !cmp.Equal(got, dec) {
		t.Errorf("Submit after the decision = %+v, want pending or the decision %+v", got, dec)
	}

	// Lookup finds the reservation by visitor and key, and nothing else.
	if got, err := b.Lookup(ctx, "dave", "k"); err != nil || got.ID != "a" || got.Status == booking.Pending {
		t.Errorf("Lookup(dave, k) = %+v, %v; want the decided reservation a", got, err)
	}
	for _, vk := range [][2]string{{"dave", "nope"}, {"nobody", "k"}, {"da", "vek"}} {
		if _, err := b.Lookup(ctx, vk[0], vk[1]); !errors.Is(err, mq.ErrNotFound) {
			t.Errorf("Lookup(%s, %s) err = %v, want ErrNotFound", vk[0], vk[1], err)
		}
	}
}

func testIdempotentConcurrent(t *testing.T, b mq.Broker) {
	ctx := context.Background()
	d := newDB(t)
	const n = 100
	type result struct {
		r       booking.Reservation
		created bool
		err     error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			r, created, err := b.Submit(ctx, reservation(fmt.Sprintf("c%d", i), "frank", int64(i)), "same")
			results[i] = result{r, created, err}
		})
	}
	close(start)
	wg.Wait()
	var winner booking.Reservation
	createdN := 0
	for i, res := range results {
		if res.err != nil {
			t.Fatalf("Submit c%d: %v", i, res.err)
		}
		if res.created {
			createdN++
			winner = res.r
			if want := reservation(fmt.Sprintf("c%d", i), "frank", int64(i)); !cmp.Equal(res.r, want) {
				t.Errorf("created reservation = %+v, want its own %+v", res.r, want)
			}
		}
	}
	if createdN != 1 {
		t.Fatalf("%d of %d concurrent Submits created, want exactly 1", createdN, n)
	}
	for i, res := range results {
		if !cmp.Equal(res.r, winner) {
			t.Errorf("Submit c%d returned %+v, want the winner %+v", i, res.r, winner)
		}
		if id := fmt.Sprintf("c%d", i); id != winner.ID {
			if _, err := b.Get(ctx, id); !errors.Is(err, mq.ErrNotFound) {
				t.Errorf("Get(%s) err = %v, want ErrNotFound: only the winner is recorded", id, err)
			}
		}
	}
	d.mu.Lock()
	d.submitted[winner.ID] = winner
	d.mu.Unlock()
	stop := consume(t, b, mq.ConsumeOptions{Workers: 3, MaxBatch: 10, RetryAfter: 100 * time.Millisecond}, d.decide)
	waitDecided(t, b, []string{winner.ID})
	stop()
	d.check(ctx, b) // and decide flagged any loser that was published
}

// testHandlerError: the database is down for the first calls; the batches
// stay in the broker and are applied once it is back.
func testHandlerError(t *testing.T, b mq.Broker) {
	ctx := context.Background()
	d := newDB(t)
	d.failLeft = 3
	var ids []string
	for i := range 5 {
		r := reservation(fmt.Sprintf("e%d", i), fmt.Sprintf("v%d", i), int64(i+1))
		d.submit(ctx, b, r, "k")
		ids = append(ids, r.ID)
	}
	stop := consume(t, b, mq.ConsumeOptions{Workers: 1, MaxBatch: 10, RetryAfter: 100 * time.Millisecond}, d.decide)
	waitDecided(t, b, ids)
	stop()
	if d.failed != 3 {
		t.Errorf("handler failed %d times, want 3", d.failed)
	}
	d.check(ctx, b)
}

// testConsumerStopped: a consumer's ctx ends while its handler runs, and the
// handler hangs (a process that stopped mid-batch, or a stuck database call):
// the batch goes to a new Consume and is applied once.
func testConsumerStopped(t *testing.T, b mq.Broker) {
	ctx := context.Background()
	d := newDB(t)
	var ids []string
	for i := range 10 {
		r := reservation(fmt.Sprintf("s%d", i), fmt.Sprintf("v%d", i), int64(i+1))
		d.submit(ctx, b, r, "k")
		ids = append(ids, r.ID)
	}
	actx, cancelA := context.WithCancel(ctx)
	defer cancelA()
	entered, release := make(chan []string, 1), make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	defer releaseOnce() // on failure, let the stuck handler go
	var calls atomic.Int32
	stuck := func(ctx context.Context, batch []booking.Reservation) ([]booking.Reservation, error) {
		out, err := d.decide(ctx, batch) // committed in the database...
		if calls.Add(1) == 1 {
			var held []string
			for _, r := range batch {
				held = append(held, r.ID)
			}
			entered <- held
			<-actx.Done() // ...the process is told to stop...
			<-release     // ...and hangs before the broker hears of it.
		}
		return out, err
	}
	doneA := make(chan error, 1)
	go func() {
		doneA <- b.Consume(actx, mq.ConsumeOptions{Workers: 1, MaxBatch: 10, RetryAfter: 100 * time.Millisecond}, stuck)
	}()
	var held []string
	select {
	case held = <-entered:
	case <-time.After(wait):
		t.Fatalf("first consumer got no batch in %v", wait)
	}
	cancelA()

	stopB := consume(t, b, mq.ConsumeOptions{Workers: 2, MaxBatch: 10, RetryAfter: 100 * time.Millisecond}, d.decide)
	waitDecided(t, b, ids)
	releaseOnce()
	select {
	case err := <-doneA:
		if err != nil {
			t.Errorf("stopped Consume returned %v, want nil", err)
		}
	case <-time.After(wait):
		t.Errorf("stopped Consume did not return within %v of its handler returning", wait)
	}
	stopB()
	d.check(ctx, b)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range held {
		if d.delivered[id] < 2 {
			t.Errorf("%s, held by the stopped consumer, was delivered %d times, want a redelivery", id, d.delivered[id])
		}
	}
}

// testBounds: a burst of submissions while a slow handler consumes with
// Workers = 3 and MaxBatch = 5.
func testBounds(t *testing.T, b mq.Broker) {
	ctx := context.Background()
	d := newDB(t)
	const n, workers, maxBatch = 500, 3, 5
	var inFlight, maxInFlight, calls atomic.Int64
	h := func(ctx context.Context, batch []booking.Reservation) ([]booking.Reservation, error) {
		cur := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if cur <= m || maxInFlight.CompareAndSwap(m, cur) {
				break
			}
		}
		calls.Add(1)
		if len(batch) == 0 || len(batch) > maxBatch {
			t.Errorf("handler got a batch of %d, want 1 to %d", len(batch), maxBatch)
		}
		time.Sleep(2 * time.Millisecond) // a database round trip
		return d.decide(ctx, batch)
	}
	stop := consume(t, b, mq.ConsumeOptions{Workers: workers, MaxBatch: maxBatch, RetryAfter: 100 * time.Millisecond}, h)

	ids := make([]string, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 20 {
		wg.Go(func() {
			for i := range next {
				ids[i] = fmt.Sprintf("b%d", i)
				d.submit(ctx, b, reservation(ids[i], fmt.Sprintf("v%d", i), int64(i+1)), "k")
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	waitDecided(t, b, ids)
	stop()
	if m := maxInFlight.Load(); m > workers {
		t.Errorf("%d handler calls ran at once, want at most Workers = %d", m, workers)
	}
	t.Logf("%d handler calls, at most %d at once", calls.Load(), maxInFlight.Load())
	d.check(ctx, b)
}

// testBacklog: Backlog counts what was submitted and not decided, before a
// consumer exists and after it decided everything.
func testBacklog(t *testing.T, b mq.Broker) {
	ctx := context.Background()
	backlog := func() mq.Backlog {
		t.Helper()
		bl, err := b.Backlog(ctx)
		if err != nil {
			t.Fatalf("Backlog: %v", err)
		}
		return bl
	}
	if bl := backlog(); bl != (mq.Backlog{}) {
		t.Fatalf("Backlog of an empty broker = %+v, want zero", bl)
	}
	d := newDB(t)
	var ids []string
	for i := range 5 {
		r := reservation(fmt.Sprintf("b%d", i), "alice", int64(i+1))
		d.submit(ctx, b, r, r.ID)
		ids = append(ids, r.ID)
	}
	// A duplicate submission is no second reservation.
	d.submit(ctx, b, reservation("b0", "alice", 1), "b0")
	bl := backlog()
	if bl.Waiting+bl.InFlight != 5 || bl.Oldest.IsZero() {
		t.Fatalf("Backlog after 5 submissions, no consumer = %+v, want 5 waiting and the oldest's time", bl)
	}
	consume(t, b, mq.ConsumeOptions{Workers: 1, MaxBatch: 2}, d.decide)
	waitDecided(t, b, ids)
	testenv.Eventually(t, wait, "an empty backlog once every reservation is decided", func() bool {
		bl = backlog()
		return bl == (mq.Backlog{})
	})
	d.check(ctx, b)
}
