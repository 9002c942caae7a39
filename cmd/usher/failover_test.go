package main

import (
	"context"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"usher/internal/apierror"
	"usher/internal/hold"
	"usher/internal/queue"
	"usher/internal/testenv"
)

// TestSentinelFailover kills the Redis primary of a Sentinel topology of its
// own (testenv.StartSentinel) with SIGKILL while visitors enter, poll, are
// admitted, hold seats and leave through the queue and hold stores that
// openStores builds from the Sentinel URL, with the store deadline usher
// serves with. Sentinel promotes the replica.
//
// It asserts what must hold whatever the timing: every failed call is
// unavailable (503), never another error; the store's active count never
// exceeds max_active; after the failover no seat is under two live holds.
// It measures, and logs as one record for docs/benchmarks.md: the seconds
// from the first failed write to the first successful one, and the
// acknowledged writes lost, counted from a client-side log of every
// acknowledged enter, admission, hold and leave checked against the store
// after the failover.
//
// It runs only with USHER_TEST_SENTINEL_FAILOVER=1: in about one run out of
// four on this machine the client never writes again after the failover
// (the test fails after its one-minute guard), a hang not yet explained
// (docs/benchmarks.md#redis-sentinel-failover-issue-11-1), so CI does not
// run it until it is.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	if os.Getenv("USHER_TEST_SENTINEL_FAILOVER") == "" {
		t.Skip("USHER_TEST_SENTINEL_FAILOVER is unset: the failover test is opt-in while its intermittent hang is open")
	}
	top := testenv.StartSentinel(t)
	var cl closers
	t.Cleanup(func() { cl.Close() })
	qs, hs, _, err := openStores(context.Background(), top.URL, "usher:", "", &cl)
	if err != nil {
		t.Fatal(err)
	}
	qs = queue.WithTimeout(qs, queue.DefaultStoreTimeout)
	hs = hold.WithTimeout(hs, queue.DefaultStoreTimeout)

	const room, scope, seats, workers = "sale", "show", 3000, 32
	set := queue.DefaultSettings()
	set.MaxActive = 20
	set.AdmitRate = 1000
	set.ActiveTTL = 10 * time.Minute // nothing lapses during the test
	set.ClaimWindow = 10 * time.Minute
	set.PresenceTimeout = 0
	if err := set.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := qs.PutRoom(context.Background(), room, set); err != nil {
		t.Fatal(err)
	}

	l := newFailoverLog()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { l.admitter(qs, room, stop) })
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				l.visit(qs, hs, room, scope, fmt.Sprintf("w%d-%d", w, i), seats, stop)
			}
		})
	}
	stopped := false
	halt := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	t.Cleanup(halt)

	testenv.Eventually(t, time.Minute, "100 holds before the kill", func() bool { return l.count(func() int { return len(l.holds) }) >= 100 })
	l.kill()
	if err := top.Primary.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "a write to succeed after writes failed", func() bool {
		return l.count(func() int { return boolInt(!l.recovered.IsZero()) }) == 1
	})
	testenv.Eventually(t, time.Minute, "the sentinels to name the replica as the primary", func() bool {
		addr, err := top.PrimaryOf()
		return err == nil && addr == top.ReplicaAddr
	})
	after := l.count(func() int { return len(l.holds) })
	testenv.Eventually(t, time.Minute, "100 more holds after the failover", func() bool { return l.count(func() int { return len(l.holds) }) >= after+100 })
	halt()

	r := l.check(t, qs, hs, room, scope)
	for _, err := range l.unexpected {
		t.Errorf("a call failed with something other than unavailable (503): %v", err)
	}
	if l.storeMaxActive > set.MaxActive {
		t.Errorf("the store counted %d active visitors, max_active is %d", l.storeMaxActive, set.MaxActive)
	}
	t.Logf("killed the primary %s; Sentinel promoted %s; calls after the kill: %v", top.PrimaryAddr, top.ReplicaAddr, l.calls)
	t.Logf("first failed write %.3fs after the kill, first successful write %.3fs after that",
		l.firstFail.Sub(l.killed).Seconds(), l.recovered.Sub(l.firstFail).Seconds())
	t.Logf("BenchmarkSentinelFailover unavailable_s %.2f acked_enters %d lost_enters %d acked_admissions %d lost_admissions %d "+
		"acked_holds %d lost_holds %d acked_leaves %d lost_leaves %d failed_calls %d max_active %d store_max_active %d "+
		"client_max_active %d seats_acked_to_two %d seats_under_two_live_holds %d oldest_lost_ack_ms %d",
		l.recovered.Sub(l.firstFail).Seconds(), len(l.entered), r.lostEnters, len(l.admitted), r.lostAdmissions,
		len(l.holds), r.lostHolds, len(l.left), r.lostLeaves, l.failed, set.MaxActive, l.storeMaxActive,
		l.clientMaxActive, r.seatsAckedTwice, r.seatsDoublyHeld, r.oldest.Milliseconds())
	if r.seatsDoublyHeld > 0 {
		t.Errorf("%d seats are under two live holds after the failover", r.seatsDoublyHeld)
	}
}

// failoverLog is the client-side log of TestSentinelFailover: what the
// store acknowledged, and when calls failed.
type failoverLog struct {
	mu                   sync.Mutex
	killed               time.Time // zero before the kill
	firstFail, recovered time.Time // first failed write after the kill; first successful write after it
	failed               int
	calls                map[string]int // after the kill, by operation and outcome
	unexpected           []error
	samples              map[string]string // after the kill: an unavailable error of each kind, by operation

	entered  map[string]time.Time // acknowledged enters, when
	admitted map[string]time.Time // visitors told they were active, when
	left     map[string]time.Time // acknowledged leaves, when
	holds    map[string]hold.Hold // acknowledged holds by id
	heldAt   map[string]time.Time // when each hold was acknowledged
	lost     map[string]bool      // visitors the store forgot while the test ran (seen gone after an acknowledged enter)
	back     map[string]bool      // visitors told active, then waiting again (a lost admission)

	active, clientMaxActive int   // visitors who believe they hold a slot
	storeMaxActive          int64 // the largest active count the store reported
}

func newFailoverLog() *failoverLog {
	return &failoverLog{entered: map[string]time.Time{}, admitted: map[string]time.Time{}, left: map[string]time.Time{},
		holds: map[string]hold.Hold{}, heldAt: map[string]time.Time{}, calls: map[string]int{}, samples: map[string]string{}, lost: map[string]bool{}, back: map[string]bool{}}
}

func (l *failoverLog) count(f func() int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return f()
}

func (l *failoverLog) kill() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.killed = time.Now()
}

// call records the outcome of a store call; write marks the calls that
// change the store (the unavailability window is measured on them).
// expected lists the domain errors the call may return. It reports whether
// the call succeeded.
func (l *failoverLog) call(op string, err error, write bool, expected ...error) bool {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.killed.IsZero() {
		k := op + " ok"
		if err != nil {
			k = op + " failed"
		}
		l.calls[k]++
	}
	if err == nil {
		if write && !l.firstFail.IsZero() && l.recovered.IsZero() {
			l.recovered = now
		}
		return true
	}
	for _, e := range expected {
		if errors.Is(err, e) {
			return false
		}
	}
	if !errors.Is(err, queue.ErrUnavailable) && !errors.Is(err, hold.ErrUnavailable) {
		l.unexpected = append(l.unexpected, err)
		return false
	}
	if st, code := apierror.Status(err); st != http.StatusServiceUnavailable {
		l.unexpected = append(l.unexpected, fmt.Errorf("answered %d %s: %w", st, code, err))
	}
	l.failed++
	if !l.killed.IsZero() {
		msg := err.Error()
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
		if len(msg) > 60 {
			msg = msg[:60]
		}
		l.samples[op+": "+msg] = err.Error()
	}
	if write && !l.killed.IsZero() && l.firstFail.IsZero() {
		l.firstFail = now
	}
	return false
}

// admitter runs admission steps and samples the store's active count
// until stop.
func (l *failoverLog) admitter(qs queue.Store, room string, stop <-chan struct{}) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		_, err := qs.Admit(context.Background(), room, time.Now())
		l.call("admit", err, true)
		st, err := qs.Stats(context.Background(), room, time.Now())
		if l.call("stats", err, false) {
			l.mu.Lock()
			l.storeMaxActive = max(l.storeMaxActive, st.Active)
			l.mu.Unlock()
		}
	}
}

// visit takes one visitor through the sale: enter, poll until active, hold
// a seat (a few tries), leave. It paces its calls on a ticker and gives up
// at stop.
func (l *failoverLog) visit(qs queue.Store, hs hold.Store, room, scope, v string, seats int, stop <-chan struct{}) {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	next := func() bool {
		select {
		case <-stop:
			return false
		case <-tick.C:
			return true
		}
	}
	var e queue.Entry
	for {
		if !next() {
			return
		}
		var err error
		if e, _, err = qs.Enter(context.Background(), room, v, time.Now()); l.call("enter", err, true) {
			break
		}
	}
	l.mu.Lock()
	l.entered[v] = time.Now()
	l.mu.Unlock()
	for e.Status != queue.Active {
		if !next() {
			return
		}
		got, err := qs.Status(context.Background(), room, v, time.Now())
		if !l.call("status", err, false) {
			continue
		}
		if got.Status == queue.Gone { // an acknowledged enter the store lost
			l.mu.Lock()
			l.lost[v] = true
			l.mu.Unlock()
			return
		}
		e = got
	}
	l.activate(v, true)
	for range 3 {
		h, err := hs.HoldSeats(context.Background(), scope, v, []string{fmt.Sprintf("A-%d", 1+mathrand.IntN(seats))}, 1, 10*time.Minute, time.Now())
		// ErrLimit: an earlier try failed unavailable but had run.
		if l.call("hold", err, true, hold.ErrTaken, hold.ErrLimit) {
			l.mu.Lock()
			l.holds[h.ID] = h
			l.heldAt[h.ID] = time.Now()
			l.mu.Unlock()
			break
		}
		if !next() {
			break
		}
		// Still active? A lost admission sends the visitor back to the line.
		if got, err := qs.Status(context.Background(), room, v, time.Now()); l.call("status", err, false) && got.Status != queue.Active {
			l.activate(v, false)
			l.mu.Lock()
			l.back[v] = true
			l.mu.Unlock()
			return
		}
	}
	l.activate(v, false) // before the call: a leave that fails may still have run
	for {
		if !next() {
			return
		}
		if l.call("leave", qs.Leave(context.Background(), room, v), true) {
			l.mu.Lock()
			l.left[v] = time.Now()
			l.mu.Unlock()
			return
		}
	}
}

// activate counts a visitor who was told it is active (on) or stops
// counting it.
func (l *failoverLog) activate(v string, on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if on {
		l.admitted[v] = time.Now()
		l.active++
		l.clientMaxActive = max(l.clientMaxActive, l.active)
		return
	}
	l.active--
}

// failoverLoss is what check found lost.
type failoverLoss struct {
	lostEnters, lostAdmissions, lostHolds, lostLeaves int
	// oldest is the acknowledgement of the oldest lost write, relative to
	// the kill (negative: before it).
	oldest time.Duration
	// seatsAckedTwice counts seats whose holds were acknowledged to two
	// visitors (the first hold lost, the seat held again); seatsDoublyHeld
	// the seats under two live holds after the failover.
	seatsAckedTwice, seatsDoublyHeld int
}

// lose counts a lost write acknowledged at ack.
func (r *failoverLoss) lose(n *int, ack, killed time.Time) {
	*n++
	r.oldest = min(r.oldest, ack.Sub(killed))
}

// check reads back every acknowledged write after the failover (the
// workers have stopped).
func (l *failoverLog) check(t *testing.T, qs queue.Store, hs hold.Store, room, scope string) failoverLoss {
	t.Helper()
	ctx := context.Background()
	var r failoverLoss
	for v := range l.lost {
		r.lose(&r.lostEnters, l.entered[v], l.killed)
	}
	for v := range l.back {
		r.lose(&r.lostAdmissions, l.admitted[v], l.killed)
	}
	for v, at := range l.entered {
		if l.lost[v] || l.back[v] {
			continue
		}
		e, err := qs.Status(ctx, room, v, time.Now())
		if err != nil {
			t.Fatalf("status of %s after the failover: %v", v, err)
		}
		left, hasLeft := l.left[v]
		admitted, wasAdmitted := l.admitted[v]
		switch {
		case hasLeft && e.Status != queue.Gone:
			r.lose(&r.lostLeaves, left, l.killed)
		case !hasLeft && e.Status == queue.Gone:
			r.lose(&r.lostEnters, at, l.killed)
		case !hasLeft && wasAdmitted && e.Status == queue.Waiting:
			r.lose(&r.lostAdmissions, admitted, l.killed)
		}
	}
	holders := map[string]map[string]bool{} // seat → visitors acknowledged a hold on it
	live := map[string]int{}                // seat → live acknowledged holds
	for id, h := range l.holds {
		for _, s := range h.Seats {
			if holders[s] == nil {
				holders[s] = map[string]bool{}
			}
			holders[s][h.Holder] = true
		}
		_, err := hs.Get(ctx, scope, id, time.Now())
		switch {
		case errors.Is(err, hold.ErrNotFound):
			r.lose(&r.lostHolds, l.heldAt[id], l.killed)
		case err != nil:
			t.Fatalf("get hold %s after the failover: %v", id, err)
		default:
			for _, s := range h.Seats {
				live[s]++
			}
		}
	}
	for s := range holders {
		if len(holders[s]) > 1 {
			r.seatsAckedTwice++
		}
		if live[s] > 1 {
			r.seatsDoublyHeld++
		}
	}
	return r
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
