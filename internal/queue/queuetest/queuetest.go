// Package queuetest is the conformance suite that every queue.Store backend
// runs: Run for semantics, Bench for speed. It pins the behaviour the rest of
// usher relies on (idempotent enter, FIFO by sequence, the atomic admission
// step under MaxActive at a room-wide rate, sliding expiry, claim window,
// passthrough, room states) and the errors a backend returns.
package queuetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"usher/internal/queue"
)

// NewStore returns an empty store for one test. Room names only need to be
// unique within that store; backends sharing a server use a fresh prefix.
type NewStore func(t testing.TB) queue.Store

// t0 is the suite's clock origin; tests move time explicitly, never sleep.
var t0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

func settings(maxActive int64, rate float64) queue.Settings {
	s := queue.DefaultSettings()
	s.MaxActive = maxActive
	s.AdmitRate = rate
	s.Interval = 100 * time.Millisecond
	s.ActiveTTL = time.Minute
	s.ClaimWindow = 10 * time.Second
	s.PresenceTimeout = 0 // the presence tests turn it on
	return s
}

func mustPut(t testing.TB, s queue.Store, room string, set queue.Settings) {
	t.Helper()
	if _, err := s.PutRoom(context.Background(), room, set, queue.PutOptions{}); err != nil {
		t.Fatalf("PutRoom(%s): %v", room, err)
	}
}

func mustEnter(t testing.TB, s queue.Store, room, visitor string, now time.Time) queue.Entry {
	t.Helper()
	e, _, err := s.Enter(context.Background(), room, visitor, now, queue.EnterOptions{})
	if err != nil {
		t.Fatalf("Enter(%s, %s): %v", room, visitor, err)
	}
	return e
}

func mustStatus(t testing.TB, s queue.Store, room, visitor string, now time.Time) queue.Entry {
	t.Helper()
	e, err := s.Status(context.Background(), room, visitor, now)
	if err != nil {
		t.Fatalf("Status(%s, %s): %v", room, visitor, err)
	}
	return e
}

func mustAdmit(t testing.TB, s queue.Store, room string, now time.Time) queue.AdmitResult {
	t.Helper()
	r, err := s.Admit(context.Background(), room, now)
	if err != nil {
		t.Fatalf("Admit(%s): %v", room, err)
	}
	return r
}

func mustStats(t testing.TB, s queue.Store, room string, now time.Time) queue.Stats {
	t.Helper()
	st, err := s.Stats(context.Background(), room, now)
	if err != nil {
		t.Fatalf("Stats(%s): %v", room, err)
	}
	return st
}

// fill makes a room whose queue holds n visitors v1…vn (nobody admitted:
// the room is paused while they enter, then set to want).
func fill(t testing.TB, s queue.Store, room string, want queue.Settings, n int) []string {
	t.Helper()
	paused := want
	paused.State = queue.Paused
	mustPut(t, s, room, paused)
	vs := make([]string, n)
	for i := range vs {
		vs[i] = fmt.Sprintf("v%d", i+1)
		mustEnter(t, s, room, vs[i], t0)
	}
	mustPut(t, s, room, want)
	return vs
}

// Run runs the conformance suite against stores made by newStore. The
// tests run in parallel, each on a store of its own: newStore must make
// independent stores, and release them with tb.Cleanup, not after Run
// returns (parallel subtests run after it).
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(*testing.T, queue.Store)
	}{
		{"Rooms", testRooms},
		{"CreateRoom", testCreateRoom},
		{"UnknownRoom", testUnknownRoom},
		{"EnterIdempotent", testEnterIdempotent},
		{"EnterConcurrentSameVisitor", testEnterConcurrentSameVisitor},
		{"ArrivalOrder", testArrivalOrder},
		{"AdmitStep", testAdmitStep},
		{"ConcurrentSchedulersCapAndOrder", testConcurrentSchedulers},
		{"RateIsRoomWide", testRateIsRoomWide},
		{"SlidingExpiry", testSlidingExpiry},
		{"ClaimWindow", testClaimWindow},
		{"Leave", testLeave},
		{"Passthrough", testPassthrough},
		{"RoomStates", testRoomStates},
		{"ReenterAfterGone", testReenterAfterGone},
		{"Stats", testStats},
		{"RefillIgnoresEarlierNow", testRefillIgnoresEarlierNow},
		{"FractionalRate", testFractionalRate},
		{"StatusNeverShortensExpiry", testStatusNeverShortensExpiry},
		{"SettingsRoundTrip", testSettingsRoundTrip},
		{"AdaptiveRate", testAdaptiveRate},
		{"ControlSteps", testControlSteps},
		{"DrawPreQueue", testDrawPreQueue},
		{"DrawClearedOpening", testDrawClearedOpening},
		{"DrawConcurrentOpening", testDrawConcurrentOpening},
		{"MaxWaiting", testMaxWaiting},
		{"Presence", testPresence},
		{"PresenceFarBack", testPresenceFarBack},
		{"PresenceReturnedFillStep", testPresenceReturnedFillStep},
		{"PresencePausedGhosts", testPresencePausedGhosts},
		{"PresencePausedPresent", testPresencePausedPresent},
		{"PresencePreQueueGhosts", testPresencePreQueueGhosts},
		{"OpeningNoStall", testOpeningNoStall},
		{"OpeningBehindGhost", testOpeningBehindGhost},
		{"InventorySoldOut", testInventorySoldOut},
		{"InventoryCap", testInventoryCap},
		{"DeleteRoom", testDeleteRoom},
		{"LaneFIFO", testLaneFIFO},
		{"LaneShare", testLaneShare},
		{"LaneEmptyLines", testLaneEmptyLines},
		{"LaneCodes", testLaneCodes},
		{"LaneCodeConcurrent", testLaneCodeConcurrent},
		{"QueueingRandom", testQueueingRandom},
		{"QueueingSwitch", testQueueingSwitch},
		{"QueueingPassthrough", testQueueingPassthrough},
		{"QueueingReject", testQueueingReject},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each test has a store of its own
			tt.fn(t, newStore(t))
		})
	}
}

func testRooms(t *testing.T, s queue.Store) {
	ctx := context.Background()
	set := settings(7, 3)
	mustPut(t, s, "b-room", set)
	mustPut(t, s, "a-room", set)
	got, err := s.Rooms(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a-room", "b-room"}; !slices.Equal(got, want) {
		t.Errorf("Rooms = %v, want %v", got, want)
	}
	set.MaxActive, set.State, set.Interval = 9, queue.Paused, 250*time.Millisecond
	mustPut(t, s, "a-room", set)
	if st := mustStats(t, s, "a-room", t0); st.Settings != set {
		t.Errorf("settings after PutRoom = %+v, want %+v", st.Settings, set)
	}
}

func testUnknownRoom(t *testing.T, s queue.Store) {
	ctx := context.Background()
	checks := map[string]error{}
	_, _, checks["Enter"] = s.Enter(ctx, "nope", "v", t0, queue.EnterOptions{})
	_, checks["Status"] = s.Status(ctx, "nope", "v", t0)
	checks["Leave"] = s.Leave(ctx, "nope", "v")
	_, checks["Admit"] = s.Admit(ctx, "nope", t0)
	_, checks["Stats"] = s.Stats(ctx, "nope", t0)
	checks["SetInventory"] = s.SetInventory(ctx, "nope", 1)
	for op, err := range checks {
		if !errors.Is(err, queue.ErrRoomNotFound) {
			t.Errorf("%s on unknown room: err = %v, want ErrRoomNotFound", op, err)
		}
	}
}

func testEnterIdempotent(t *testing.T, s queue.Store) {
	ctx := context.Background()
	fill(t, s, "r", settings(10, 1), 3)
	first, created, err := s.Enter(ctx, "r", "late", t0, queue.EnterOptions{})
	if err != nil || !created {
		t.Fatalf("first Enter: created=%v err=%v, want created", created, err)
	}
	if first.Status != queue.Waiting || first.Position != 4 || first.Seq != 4 {
		t.Fatalf("first Enter = %+v, want waiting at position 4, seq 4", first)
	}
	mustEnter(t, s, "r", "later", t0)
	again, created, err := s.Enter(ctx, "r", "late", t0.Add(time.Hour), queue.EnterOptions{})
	if err != nil || created {
		t.Fatalf("second Enter: created=%v err=%v, want not created", created, err)
	}
	if again != first {
		t.Errorf("second Enter = %+v, want the same entry %+v", again, first)
	}
}

func testEnterConcurrentSameVisitor(t *testing.T, s queue.Store) {
	ctx := context.Background()
	fill(t, s, "r", settings(1, 1), 1)
	const n = 200
	var wg sync.WaitGroup
	var createdCount atomic.Int64
	seqs := make([]int64, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, created, err := s.Enter(ctx, "r", "tabby", t0, queue.EnterOptions{})
			seqs[i], errs[i] = e.Seq, err
			if created {
				createdCount.Add(1)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Enter #%d: %v", i, err)
		}
		if seqs[i] != 2 {
			t.Fatalf("Enter #%d seq = %d, want 2", i, seqs[i])
		}
	}
	if got := createdCount.Load(); got != 1 {
		t.Errorf("created = %d times, want exactly 1", got)
	}
	st := mustStats(t, s, "r", t0)
	if st.Waiting != 2 || st.LastSeq != 2 {
		t.Errorf("after %d concurrent enters: waiting=%d lastSeq=%d, want 2 and 2", n, st.Waiting, st.LastSeq)
	}
}

func testArrivalOrder(t *testing.T, s queue.Store) {
	vs := fill(t, s, "r", settings(1, 1), 50)
	for i, v := range vs {
		e := mustStatus(t, s, "r", v, t0)
		if e.Status != queue.Waiting || e.Position != int64(i+1) || e.Seq != int64(i+1) {
			t.Fatalf("Status(%s) = %+v, want waiting at position %d", v, e, i+1)
		}
	}
}

func testAdmitStep(t *testing.T, s queue.Store) {
	set := settings(5, 30) // batch 3 per 100 ms
	vs := fill(t, s, "r", set, 10)
	res := mustAdmit(t, s, "r", t0)
	if want := vs[:3]; !slices.Equal(res.Admitted, want) {
		t.Fatalf("first step admitted %v, want %v (a full bucket, one batch)", res.Admitted, want)
	}
	if res := mustAdmit(t, s, "r", t0); len(res.Admitted) != 0 {
		t.Fatalf("second step at the same instant admitted %v, want none (bucket empty)", res.Admitted)
	}
	res = mustAdmit(t, s, "r", t0.Add(100*time.Millisecond))
	if want := vs[3:5]; !slices.Equal(res.Admitted, want) {
		t.Fatalf("step after one interval admitted %v, want %v (cap 5)", res.Admitted, want)
	}
	if e := mustStatus(t, s, "r", vs[5], t0); e.Position != 1 {
		t.Errorf("%s position = %d after 5 admitted, want 1", vs[5], e.Position)
	}
	e, err := s.Status(context.Background(), "r", vs[0], t0)
	if err != nil || e.Status != queue.Active {
		t.Fatalf("admitted visitor Status = %+v, %v, want active", e, err)
	}
	st := mustStats(t, s, "r", t0.Add(time.Second))
	if st.Active != 5 || st.Waiting != 5 || st.AdmittedTotal != 5 {
		t.Errorf("stats = %+v, want 5 active, 5 waiting, 5 admitted", st)
	}
	// Visitors who never claimed expire after the claim window; vs[0] claimed.
	// The bucket is full again: BucketCapacity, one more than a batch.
	res = mustAdmit(t, s, "r", t0.Add(100*time.Millisecond+set.ClaimWindow))
	if res.Expired != 4 {
		t.Errorf("expired = %d, want the 4 unclaimed", res.Expired)
	}
	if want := vs[5:9]; !slices.Equal(res.Admitted, want) {
		t.Errorf("after expiry admitted %v, want %v", res.Admitted, want)
	}
}

// testConcurrentSchedulers runs 4 schedulers against one room while visitors
// leave and enter, checking the cap after every step and that admission
// order equals arrival order.
func testConcurrentSchedulers(t *testing.T, s queue.Store) {
	const (
		schedulers = 4
		steps      = 500
		maxActive  = 20
	)
	set := settings(maxActive, 1e6) // the rate never limits here: the cap does
	set.Interval = 10 * time.Millisecond
	vs := fill(t, s, "r", set, schedulers*steps*2)
	batches := runSchedulers(t, s, "r", t0, schedulers, steps, maxActive, nil)
	slices.SortFunc(batches, func(a, b []string) int { return seqOf(a[0]) - seqOf(b[0]) })
	got := slices.Concat(batches...)
	if len(got) <= maxActive {
		t.Fatalf("admitted %d visitors in total, want more than the cap %d (slots were freed)", len(got), maxActive)
	}
	if want := vs[:len(got)]; !slices.Equal(got, want) {
		t.Errorf("admission order differs from arrival order (first 10 admitted %v)", got[:10])
	}
}

// runSchedulers runs n schedulers of steps steps each on room, on one
// simulated clock from start (a millisecond a step). After each step a
// scheduler checks the cap (Stats.Active ≤ maxActive) and, every other
// step, frees a slot so that later steps have work; check, if set, may
// refuse a step's batch. It returns the batches that admitted someone;
// the first error fails the test.
func runSchedulers(t *testing.T, s queue.Store, room string, start time.Time, n, steps int, maxActive int64, check func(w, i int, admitted []string) error) [][]string {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var batches [][]string
	var clock atomic.Int64
	errc := make(chan error, n)
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for i := range steps {
				now := start.Add(time.Duration(clock.Add(1)) * time.Millisecond)
				res, err := s.Admit(ctx, room, now)
				if err == nil && check != nil {
					err = check(w, i, res.Admitted)
				}
				if err != nil {
					errc <- err
					return
				}
				if len(res.Admitted) > 0 {
					mu.Lock()
					batches = append(batches, res.Admitted)
					mu.Unlock()
				}
				st, err := s.Stats(ctx, room, now)
				if err != nil {
					errc <- err
					return
				}
				if st.Active > maxActive {
					errc <- fmt.Errorf("scheduler %d step %d: active = %d > max %d", w, i, st.Active, maxActive)
					return
				}
				if len(res.Admitted) > 0 && i%2 == 0 {
					if err := s.Leave(ctx, room, res.Admitted[0]); err != nil {
						errc <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	return batches
}

// admitTogether runs 4 schedulers of 100 steps each on room, on one
// simulated clock from start that each step moves 25 ms on, and returns
// the time they took on it; an error fails the test.
func admitTogether(t *testing.T, s queue.Store, room string, start time.Time) time.Duration {
	t.Helper()
	ctx := context.Background()
	var clock atomic.Int64 // milliseconds
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for range 100 {
				now := start.Add(time.Duration(clock.Add(25)) * time.Millisecond)
				if _, err := s.Admit(ctx, room, now); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	return time.Duration(clock.Load()) * time.Millisecond
}

func seqOf(v string) int {
	var n int
	fmt.Sscanf(v, "v%d", &n)
	return n
}

// testRateIsRoomWide runs 4 schedulers on one simulated clock and checks that
// together they admit at AdmitRate, not four times it.
func testRateIsRoomWide(t *testing.T, s queue.Store) {
	const rate = 200.0
	set := settings(1e6, rate) // batch 20 per 100 ms
	fill(t, s, "r", set, 5000)
	elapsed := admitTogether(t, s, "r", t0) // 10 s
	st := mustStats(t, s, "r", t0)
	want := rate*elapsed.Seconds() + float64(set.Batch()) // the bucket starts full
	if got := float64(st.AdmittedTotal); got < 0.97*want || got > 1.03*want {
		t.Errorf("4 schedulers admitted %v in %v, want %v ± 3%% (rate %v/s)", got, elapsed, want, rate)
	}
}

func testSlidingExpiry(t *testing.T, s queue.Store) {
	set := settings(1, 10)
	fill(t, s, "r", set, 2)
	mustAdmit(t, s, "r", t0)
	mustStatus(t, s, "r", "v1", t0) // the claim
	now := t0
	for range 5 { // renew every half TTL: stays active well past one TTL
		now = now.Add(set.ActiveTTL / 2)
		if e := mustStatus(t, s, "r", "v1", now); e.Status != queue.Active || !e.ExpiresAt.Equal(now.Add(set.ActiveTTL)) {
			t.Fatalf("renewal at %v = %+v, want active until %v", now.Sub(t0), e, now.Add(set.ActiveTTL))
		}
		if res := mustAdmit(t, s, "r", now); res.Expired != 0 || len(res.Admitted) != 0 {
			t.Fatalf("step while v1 active = %+v, want nothing", res)
		}
	}
	now = now.Add(set.ActiveTTL) // idle for one TTL
	if e := mustStatus(t, s, "r", "v1", now); e.Status != queue.Gone {
		t.Fatalf("after an idle TTL v1 = %+v, want gone", e)
	}
	res := mustAdmit(t, s, "r", now)
	if !slices.Equal(res.Admitted, []string{"v2"}) {
		t.Errorf("after v1 expired admitted %v, want [v2]", res.Admitted)
	}
}

func testClaimWindow(t *testing.T, s queue.Store) {
	set := settings(2, 20) // batch 2
	fill(t, s, "r", set, 4)
	mustAdmit(t, s, "r", t0)
	justBefore := t0.Add(set.ClaimWindow - time.Millisecond)
	if e := mustStatus(t, s, "r", "v1", justBefore); e.Status != queue.Active { // v1 claims
		t.Fatalf("v1 before the claim window = %+v, want active", e)
	}
	after := t0.Add(set.ClaimWindow)
	res := mustAdmit(t, s, "r", after)
	if res.Expired != 1 || !slices.Equal(res.Admitted, []string{"v3"}) {
		t.Errorf("step at the claim window = %+v, want v2 expired and v3 admitted", res)
	}
	if e := mustStatus(t, s, "r", "v2", after); e.Status != queue.Gone {
		t.Errorf("unclaimed v2 = %+v, want gone", e)
	}
	if e := mustStatus(t, s, "r", "v1", after); e.Status != queue.Active {
		t.Errorf("claimed v1 = %+v, want active", e)
	}
}

func testLeave(t *testing.T, s queue.Store) {
	ctx := context.Background()
	set := settings(1, 10)
	fill(t, s, "r", set, 4)
	mustAdmit(t, s, "r", t0) // v1 active
	for _, v := range []string{"v1", "v3", "never-entered"} {
		if err := s.Leave(ctx, "r", v); err != nil {
			t.Fatalf("Leave(%s): %v", v, err)
		}
	}
	if e := mustStatus(t, s, "r", "v4", t0); e.Position != 2 {
		t.Errorf("v4 position after v3 left = %d, want 2", e.Position)
	}
	st := mustStats(t, s, "r", t0)
	if st.Active != 0 || st.Waiting != 2 || st.HeadSeq != 2 {
		t.Errorf("stats after leaves = %+v, want 0 active, 2 waiting, head 2", st)
	}
	res := mustAdmit(t, s, "r", t0.Add(time.Second))
	if !slices.Equal(res.Admitted, []string{"v2"}) {
		t.Errorf("after v1 left admitted %v, want [v2] at once", res.Admitted)
	}
}

func testPassthrough(t *testing.T, s queue.Store) {
	ctx := context.Background()
	set := settings(2, 10) // batch 1: one passthrough per 100 ms
	mustPut(t, s, "r", set)
	e, created, err := s.Enter(ctx, "r", "a", t0, queue.EnterOptions{})
	if err != nil || !created || e.Status != queue.Active || !e.ExpiresAt.Equal(t0.Add(set.ActiveTTL)) {
		t.Fatalf("Enter into an empty room = %+v, created=%v, %v; want active until %v", e, created, err, t0.Add(set.ActiveTTL))
	}
	if e := mustEnter(t, s, "r", "b", t0); e.Status != queue.Waiting {
		t.Errorf("Enter with the rate used up = %+v, want waiting", e)
	}
	if e := mustEnter(t, s, "r", "c", t0.Add(time.Second)); e.Status != queue.Waiting || e.Position != 2 {
		t.Errorf("Enter with someone waiting = %+v, want waiting at 2 (never ahead of b)", e)
	}
	mustAdmit(t, s, "r", t0.Add(time.Second)) // b admitted; full
	if err := s.Leave(ctx, "r", "c"); err != nil {
		t.Fatal(err)
	}
	if e := mustEnter(t, s, "r", "d", t0.Add(2*time.Second)); e.Status != queue.Waiting {
		t.Errorf("Enter with no free slot = %+v, want waiting", e)
	}
	st := mustStats(t, s, "r", t0.Add(2*time.Second))
	if st.AdmittedTotal != 2 || st.LastSeq != 4 {
		t.Errorf("stats = %+v, want 2 admitted, last seq 4", st)
	}
}

func testRoomStates(t *testing.T, s queue.Store) {
	ctx := context.Background()
	set := settings(10, 100)
	set.State = queue.Paused
	mustPut(t, s, "r", set)
	if e := mustEnter(t, s, "r", "a", t0); e.Status != queue.Waiting {
		t.Fatalf("Enter into a paused room = %+v, want waiting (no passthrough)", e)
	}
	if res := mustAdmit(t, s, "r", t0.Add(time.Second)); len(res.Admitted) != 0 {
		t.Fatalf("paused room admitted %v", res.Admitted)
	}
	set.State = queue.Closed
	mustPut(t, s, "r", set)
	if _, _, err := s.Enter(ctx, "r", "b", t0, queue.EnterOptions{}); !errors.Is(err, queue.ErrRoomClosed) {
		t.Errorf("Enter into a closed room: err = %v, want ErrRoomClosed", err)
	}
	if e := mustEnter(t, s, "r", "a", t0); e.Status != queue.Waiting || e.Position != 1 {
		t.Errorf("re-Enter of a waiting visitor into a closed room = %+v, want its place", e)
	}
	if res := mustAdmit(t, s, "r", t0.Add(2*time.Second)); len(res.Admitted) != 0 {
		t.Errorf("closed room admitted %v", res.Admitted)
	}
	set.State = queue.SoldOut
	mustPut(t, s, "r", set)
	if _, _, err := s.Enter(ctx, "r", "c", t0, queue.EnterOptions{}); !errors.Is(err, queue.ErrRoomClosed) {
		t.Errorf("Enter into a sold-out room: err = %v, want ErrRoomClosed", err)
	}
	if res := mustAdmit(t, s, "r", t0.Add(2500*time.Millisecond)); len(res.Admitted) != 0 {
		t.Errorf("sold-out room admitted %v", res.Admitted)
	}
	set.State = queue.Open
	mustPut(t, s, "r", set)
	if res := mustAdmit(t, s, "r", t0.Add(3*time.Second)); !slices.Equal(res.Admitted, []string{"a"}) {
		t.Errorf("reopened room admitted %v, want [a]", res.Admitted)
	}
}

func testReenterAfterGone(t *testing.T, s queue.Store) {
	set := settings(1, 10)
	fill(t, s, "r", set, 2)
	mustAdmit(t, s, "r", t0)
	late := t0.Add(set.ClaimWindow + time.Second) // v1 never claimed
	e := mustEnter(t, s, "r", "v1", late)
	if e.Status != queue.Waiting || e.Seq != 3 || e.Position != 2 {
		t.Errorf("re-Enter after expiry = %+v, want a new place at the back (seq 3, position 2)", e)
	}
}

func testStats(t *testing.T, s queue.Store) {
	set := settings(3, 10)
	mustPut(t, s, "empty", set)
	if st := mustStats(t, s, "empty", t0); st.LastSeq != 0 || st.HeadSeq != 1 || st.Waiting != 0 {
		t.Errorf("empty room stats = %+v, want last 0, head 1", st)
	}
	fill(t, s, "r", set, 5)
	mustAdmit(t, s, "r", t0)
	st := mustStats(t, s, "r", t0)
	want := queue.Stats{Settings: set, Waiting: 4, Active: 1, AdmittedTotal: 1, LastSeq: 5, HeadSeq: 2}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("stats = %+v, want %+v", st, want)
	}
	// Expired but not yet removed active visitors do not count.
	if st := mustStats(t, s, "r", t0.Add(set.ClaimWindow)); st.Active != 0 {
		t.Errorf("active after the claim window = %d, want 0", st.Active)
	}
}

// testRefillIgnoresEarlierNow: a step with a clock behind the last refill
// (another instance's skewed clock) adds no tokens.
func testRefillIgnoresEarlierNow(t *testing.T, s queue.Store) {
	set := settings(100, 10) // batch 1 per 100 ms
	fill(t, s, "r", set, 10)
	later := t0.Add(time.Second)
	if res := mustAdmit(t, s, "r", later); len(res.Admitted) != 1 {
		t.Fatalf("first step admitted %v, want 1 (full bucket of 1)", res.Admitted)
	}
	for i := range 5 {
		if res := mustAdmit(t, s, "r", later.Add(-time.Duration(i+1)*time.Second)); len(res.Admitted) != 0 {
			t.Fatalf("step %d s before the last refill admitted %v, want none", i+1, res.Admitted)
		}
	}
	if res := mustAdmit(t, s, "r", later.Add(100*time.Millisecond)); len(res.Admitted) != 1 {
		t.Errorf("step one interval after the last refill admitted %v, want 1", res.Admitted)
	}
}

// testStatusNeverShortensExpiry: a renewal with an earlier clock, or after
// ActiveTTL was lowered, keeps the later expiry.
func testStatusNeverShortensExpiry(t *testing.T, s queue.Store) {
	set := settings(10, 10)
	mustPut(t, s, "r", set)
	e := mustEnter(t, s, "r", "a", t0) // passthrough: expires t0+ActiveTTL
	if e.Status != queue.Active {
		t.Fatalf("enter = %+v, want active", e)
	}
	if got := mustStatus(t, s, "r", "a", t0.Add(-10*time.Second)); !got.ExpiresAt.Equal(e.ExpiresAt) {
		t.Errorf("renewal with an earlier clock: expiry %v, want it kept at %v", got.ExpiresAt, e.ExpiresAt)
	}
	set.ActiveTTL = 5 * time.Second
	set.ClaimWindow = time.Second
	mustPut(t, s, "r", set)
	if got := mustStatus(t, s, "r", "a", t0.Add(time.Second)); !got.ExpiresAt.Equal(e.ExpiresAt) {
		t.Errorf("renewal after lowering the TTL: expiry %v, want it kept at %v", got.ExpiresAt, e.ExpiresAt)
	}
}

// testCreateRoom: CreateRoom creates once and never overwrites.
func testCreateRoom(t *testing.T, s queue.Store) {
	ctx := context.Background()
	first := settings(7, 3)
	if created, err := s.PutRoom(ctx, "r", first, queue.PutOptions{OnlyCreate: true}); err != nil || !created {
		t.Fatalf("CreateRoom of a new room = %v, %v; want created", created, err)
	}
	mustEnter(t, s, "r", "a", t0)
	other := settings(9, 5)
	if created, err := s.PutRoom(ctx, "r", other, queue.PutOptions{OnlyCreate: true}); err != nil || created {
		t.Fatalf("CreateRoom of an existing room = %v, %v; want not created", created, err)
	}
	st := mustStats(t, s, "r", t0)
	if st.Settings != first || st.LastSeq != 1 {
		t.Errorf("after a second CreateRoom: %+v, want the first settings and its entry kept", st)
	}
	if rooms, err := s.Rooms(ctx); err != nil || !slices.Equal(rooms, []string{"r"}) {
		t.Errorf("Rooms = %v, %v; want [r]", rooms, err)
	}
}

// testFractionalRate: a rate that is not a whole number of visitors per
// interval, with steps that run late, still admits at AdmitRate on average
// (the bucket keeps the fraction a step leaves).
func testFractionalRate(t *testing.T, s queue.Store) {
	set := settings(1e6, 17)
	set.Interval = 117 * time.Millisecond // 1.989 visitors per interval
	fill(t, s, "r", set, 400)
	now := t0
	for i := range 100 {
		now = now.Add(set.Interval + time.Duration(i%3)*time.Millisecond) // late by 0–2 ms
		mustAdmit(t, s, "r", now)
	}
	st := mustStats(t, s, "r", now)
	// The first step finds the bucket's initial Batch; from then on it fills
	// at 17/s. Whole visitors only: at most one token is left unused.
	elapsed := now.Sub(t0.Add(set.Interval))
	want := 17*elapsed.Seconds() + float64(set.Batch())
	if got := float64(st.AdmittedTotal); got < want-1 || got > want {
		t.Errorf("admitted %v in %v at 17/s, want %.2f (-1)", got, elapsed, want)
	}
}

// testSettingsRoundTrip: every field of queue.Settings, set to a value other
// than its default, reads back unchanged after PutRoom (new and existing
// room) and CreateRoom. The values are made by reflection over the struct,
// not from queue.SettingFields, so a field added to Settings but forgotten in
// the table or in a store's protocol fails here.
func testSettingsRoundTrip(t *testing.T, s queue.Store) {
	ctx := context.Background()
	def := queue.DefaultSettings()
	want := nonDefault(t, def)
	if err := want.Validate(); err != nil {
		t.Fatalf("queuetest: the non-default settings %+v are invalid (%v): change nonDefault", want, err)
	}
	mustPut(t, s, "put", want)
	mustPut(t, s, "replaced", def)
	mustPut(t, s, "replaced", want)
	if created, err := s.PutRoom(ctx, "created", want, queue.PutOptions{OnlyCreate: true}); err != nil || !created {
		t.Fatalf("CreateRoom = %v, %v; want created", created, err)
	}
	wantV := reflect.ValueOf(want)
	for _, room := range []string{"put", "replaced", "created"} {
		got := reflect.ValueOf(mustStats(t, s, room, t0).Settings)
		for i := range wantV.NumField() {
			g, w := got.Field(i).Interface(), wantV.Field(i).Interface()
			if gt, ok := g.(time.Time); ok && gt.Equal(w.(time.Time)) {
				continue
			}
			if g != w {
				t.Errorf("room %s: Settings.%s = %v, want %v", room, wantV.Type().Field(i).Name, g, w)
			}
		}
	}
}

// nonDefault returns def with every field changed to another valid value
// (a new kind of field needs a case here).
func nonDefault(t *testing.T, def queue.Settings) queue.Settings {
	t.Helper()
	set := def
	v := reflect.ValueOf(&set).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch {
		case name == "Shards" || name == "ShardStrategy":
			// A sharded room cannot have the other fields' values here;
			// RunSharded's SettingsRoundTrip changes these two.
			continue
		case f.Type() == reflect.TypeFor[queue.RoomState]():
			f.Set(reflect.ValueOf(queue.Paused))
		case f.Type() == reflect.TypeFor[queue.Admission]():
			f.Set(reflect.ValueOf(queue.Adaptive))
		case f.Type() == reflect.TypeFor[queue.Queueing]():
			f.Set(reflect.ValueOf(queue.QueueRandom))
		case f.Type() == reflect.TypeFor[time.Time]():
			f.Set(reflect.ValueOf(t0.Add(time.Hour + 1234*time.Millisecond)))
		case f.Type() == reflect.TypeFor[time.Duration]():
			f.SetInt(f.Int() + int64(1234567*time.Nanosecond)) // not whole milliseconds
		case f.CanInt():
			f.SetInt(f.Int()*3 + 7)
		case f.CanFloat():
			f.SetFloat(f.Float()*1.5 + 0.1) // not a whole number
		case f.Kind() == reflect.Bool:
			f.SetBool(!f.Bool())
		default:
			t.Fatalf("queuetest: no non-default value for Settings.%s of type %s: add a case to nonDefault", name, f.Type())
		}
		if reflect.DeepEqual(f.Interface(), reflect.ValueOf(def).Field(i).Interface()) {
			t.Fatalf("queuetest: Settings.%s = %v is its default: change nonDefault", name, f.Interface())
		}
	}
	return set
}
