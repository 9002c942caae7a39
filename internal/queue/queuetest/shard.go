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

// RunSharded runs the part of the suite that a room of several shards
// (queue.Settings.Shards > 1, ordered by strategy) supports, on rooms of
// four shards: settings that round-trip and a layout that stays fixed,
// idempotent enter, exact positions and FIFO admission (counter and
// timestamp: the suite's entrants arrive a millisecond apart, as the
// timestamp strategy orders by the entering clock), the cap and the rate
// exact under concurrent schedulers, leave, and the room's states.
//
// It asks less than Run, as the sharded line promises less: no
// passthrough is tested (a sharded Redis room has none), entries' Seq and
// Stats' LastSeq and HeadSeq are not compared (a sharded Redis room has no
// sequence numbers), Enter's Position may be an estimate (Status's is
// exact but under estimate, whose positions are estimates and whose
// steps take a share from each shard), and an admitted visitor holds the slot for
// ActiveTTL (ClaimWindow equals it).
func RunSharded(t *testing.T, newStore NewStore, strategy queue.ShardStrategy) {
	tests := []struct {
		name string
		fn   func(*testing.T, queue.Store, queue.ShardStrategy)
	}{
		{"SettingsRoundTrip", testShardedSettings},
		{"LayoutFixed", testShardedLayoutFixed},
		{"EnterIdempotent", testShardedEnterIdempotent},
		{"PositionsAndFIFO", testShardedFIFO},
		{"ConcurrentSchedulersCap", testShardedConcurrentSchedulers},
		{"RateIsRoomWide", testShardedRate},
		{"Leave", testShardedLeave},
		{"RoomStates", testShardedStates},
		{"Inventory", testShardedInventory},
		{"AdaptiveRate", testShardedAdaptive},
		{"Queueing", testShardedQueueing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newStore(t), strategy)
		})
	}
}

// shardedSettings are settings(maxActive, rate) for a room of four
// shards: no inventory cap (testShardedInventory sets one), a slot held
// for ActiveTTL.
func shardedSettings(strategy queue.ShardStrategy, maxActive int64, rate float64) queue.Settings {
	s := settings(maxActive, rate)
	s.Shards, s.ShardStrategy = 4, strategy
	s.VisitorsPerUnit = 0
	s.ClaimWindow = s.ActiveTTL
	return s
}

// fillSharded makes a paused room of n visitors v1…vn, entering a
// millisecond apart from t0, then sets it to want. It returns them and
// the instant after the last.
func fillSharded(t testing.TB, s queue.Store, room string, want queue.Settings, n int) ([]string, time.Time) {
	t.Helper()
	paused := want
	paused.State = queue.Paused
	mustPut(t, s, room, paused)
	vs := make([]string, n)
	now := t0
	for i := range vs {
		vs[i] = fmt.Sprintf("v%d", i+1)
		if e := mustEnter(t, s, room, vs[i], now); e.Status != queue.Waiting || e.Position < 1 {
			t.Fatalf("Enter(%s) into a paused room = %+v, want waiting", vs[i], e)
		}
		now = now.Add(time.Millisecond)
	}
	mustPut(t, s, room, want)
	return vs, now
}

func ordered(strategy queue.ShardStrategy) bool { return strategy != queue.ShardEstimate }

func testShardedSettings(t *testing.T, s queue.Store, strategy queue.ShardStrategy) {
	ctx := context.Background()
	want := shardedSettings(strategy, 123, 4.5)
	want.State, want.Shards, want.ClientEntersPerMinute, want.PowBits = queue.Paused, queue.MaxShards, 17, 3
	want.RequireIdentity, want.RequireInvite = true, true
	want.ActiveTTL, want.ClaimWindow = 90*time.Second+1234567, 90*time.Second+1234567
	if err := want.Validate(); err != nil {
		t.Fatalf("queuetest: sharded settings %+v are invalid: %v", want, err)
	}
	mustPut(t, s, "put", want)
	if created, err := s.PutRoom(ctx, "created", want, queue.PutOptions{OnlyCreate: true}); err != nil || !created {
		t.Fatalf("CreateRoom = %v, %v; want created", created, err)
	}
	for _, room := range []string{"put", "created"} {
		if got := mustStats(t, s, room, t0).Settings; got != want {
			t.Errorf("room %s: settings = %+v, want %+v", room, got, want)
		}
	}
	rooms, err := s.Rooms(ctx)
	if err != nil || !slices.Equal(rooms, []string{"created", "put"}) {
		t.Errorf("Rooms = %v, %v; want [created put]", rooms, err)
	}
}

// testShardedLayoutFixed: settings that change shards or shard_strategy of
// an existing room are refused (ErrShardsFixed, a 400) and change
// nothing; others are taken. A room of one shard has no line shards: its
// shard_strategy may change.
func testShardedLayoutFixed(t *testing.T, s queue.Store, strategy queue.ShardStrategy) {
	ctx := context.Background()
	set := shardedSettings(strategy, 10, 5)
	mustPut(t, s, "r", set)
	other := queue.ShardCounter
	if strategy == queue.ShardCounter {
		other = queue.ShardTimestamp
	}
	one := set
	one.Shards = 1
	for _, bad := range []queue.Settings{
		func() queue.Settings { b := set; b.Shards, b.MaxActive = 8, 99; return b }(),
		func() queue.Settings { b := set; b.ShardStrategy, b.MaxActive = other, 99; return b }(),
		one,
	} {
		if _, err := s.PutRoom(ctx, "r", bad, queue.PutOptions{}); !errors.Is(err, queue.ErrShardsFixed) || !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("PutRoom to %d shards, %s = %v; want ErrShardsFixed", bad.Shards, bad.ShardStrategy, err)
		}
	}
	if got := mustStats(t, s, "r", t0).Settings; got != set {
		t.Errorf("settings after refused PutRooms = %+v, want unchanged %+v", got, set)
	}
	set.MaxActive, set.State = 11, queue.Paused
	mustPut(t, s, "r", set)
	if got := mustStats(t, s, "r", t0).Settings; got != set {
		t.Errorf("settings after PutRoom = %+v, want %+v", got, set)
	}
	// A room of one shard cannot become sharded either.
	plain := settings(10, 5)
	mustPut(t, s, "plain", plain)
	plain.Shards, plain.ShardStrategy, plain.VisitorsPerUnit, plain.ClaimWindow = 4, strategy, 0, plain.ActiveTTL
	if _, err := s.PutRoom(ctx, "plain", plain, queue.PutOptions{}); !errors.Is(err, queue.ErrShardsFixed) {
		t.Errorf("PutRoom making a room sharded = %v, want ErrShardsFixed", err)
	}
	plain = settings(10, 5)
	plain.ShardStrategy = queue.ShardCounter // another than the default
	if settings(10, 5).ShardStrategy == queue.ShardCounter {
		plain.ShardStrategy = queue.ShardEstimate
	}
	if _, err := s.PutRoom(ctx, "plain", plain, queue.PutOptions{}); err != nil {
		t.Errorf("PutRoom changing a one-shard room's strategy to %s = %v, want nil", plain.ShardStrategy, err)
	} else if got := mustStats(t, s, "plain", t0).Settings; got != plain {
		t.Errorf("settings after PutRoom = %+v, want %+v", got, plain)
	}
	if created, err := s.PutRoom(ctx, "r", shardedSettings(strategy, 1, 1), queue.PutOptions{OnlyCreate: true}); err != nil || created {
		t.Errorf("CreateRoom of an existing room = %v, %v; want not created", created, err)
	}
}

func testShardedEnterIdempotent(t *testing.T, s queue.Store, strategy queue.ShardStrategy) {
	ctx := context.Background()
	_, now := fillSharded(t, s, "r", shardedSettings(strategy, 10, 1), 20)
	first, created, err := s.Enter(ctx, "r", "late", now, queue.EnterOptions{})
	if err != nil || !created || first.Status != queue.Waiting {
		t.Fatalf("first Enter = %+v, created=%v, %v; want a new waiting entry", first, created, err)
	}
	again, created, err := s.Enter(ctx, "r", "late", now.Add(time.Hour), queue.EnterOptions{})
	if err != nil || created || again != first {
		t.Errorf("second Enter = %+v, created=%v, %v; want the same entry %+v, not created", again, created, err, first)
	}
	if e := mustStatus(t, s, "r", "late", now); e.Status != queue.Waiting || ordered(strategy) && e.Position != 21 {
		t.Errorf("Status(late) = %+v, want waiting (at 21)", e)
	}
	const n = 100
	var wg sync.WaitGroup
	var createdCount atomic.Int64
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, created, err := s.Enter(ctx, "r", "tabby", now, queue.EnterOptions{})
			errs[i] = err
			if created {
				createdCount.Add(1)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got := createdCount.Load(); got != 1 {
		t.Errorf("%d concurrent Enters of one visitor created %d places, want 1", n, got)
	}
	if st := mustStats(t, s, "r", now); st.Waiting != 22 {
		t.Errorf("waiting = %d, want 22", st.Waiting)
	}
}

// testShardedFIFO: exact positions from Status, and admission in arrival
// order (counter, timestamp; under estimate: everyone once, within the cap).
func testShardedFIFO(t *testing.T, s queue.Store, strategy queue.ShardStrategy) {
	set := shardedSettings(strategy, 1000, 70) // batch 7 per 100 ms
	vs, now := fillSharded(t, s, "r", set, 60)
	for i, v := range vs {
		e := mustStatus(t, s, "r", v, now)
		if e.Status != queue.Waiting || (ordered(strategy) && e.Position != int64(i+1)) || e.Position < 1 {
			t.Fatalf("Status(%s) = %+v, want waiting at %d", v, e, i+1)
		}
	}
	first := mustAdmit(t, s, "r", now)
	if len(first.Admitted) != 7 {
		t.Fatalf("first step admitted %v, want a batch of 7", first.Admitted)
	}
	got := first.Admitted
	for i := 1; len(got) < len(vs) && i < 100; i++ {
		res := mustAdmit(t, s, "r", now.Add(time.Duration(i)*100*time.Millisecond))
		if len(res.Admitted) > 8 {
			t.Fatalf("a step admitted %d, want at most the bucket's 8", len(res.Admitted))
		}
		got = append(got, res.Admitted...)
	}
	if ordered(strategy) && !slices.Equal(got, vs) {
		t.Errorf("admitted %v, want the arrival order %v", got, vs)
	}
	if sorted := slices.Sorted(slices.Values(got)); !slices.Equal(sorted, slices.Sorted(slices.Values(vs))) {
		t.Errorf("admitted %v, want each of the %d once", got, len(vs))
	}
	e := mustStatus(t, s, "r", vs[0], now)
	if e.Status != queue.Active || !e.ExpiresAt.Equal(now.Add(set.ActiveTTL)) {
		t.Errorf("Status of the first admitted = %+v, want active until %v", e, now.Add(set.ActiveTTL))
	}
	if e, _, err := s.Enter(context.Background(), "r", vs[0], now, queue.EnterOptions{}); err != nil || e.Status != queue.Active {
		t.Errorf("Enter of an admitted visitor = %+v, %v; want active", e, err)
	}
	st := mustStats(t, s, "r", now)
	if st.Waiting != 0 || st.Active != 60 || st.AdmittedTotal != 60 {
		t.Errorf("stats = %+v, want 0 waiting, 60 active, 60 admitted", st)
	}
}

// testShardedConcurrentSchedulers runs 4 schedulers on one room while
// admitted visitors leave: the cap holds after every step, nobody is
// admitted twice, each step admits in arrival order, and (counter,
// timestamp) those admitted are the first arrivals.
func testShardedConcurrentSchedulers(t *testing.T, s queue.Store, strategy queue.ShardStrategy) {
	const (
		schedulers = 4
		steps      = 150
		maxActive  = 20
	)
	set := shardedSettings(strategy, maxActive, 1e6) // the cap limits, not the rate
	set.Interval = 10 * time.Millisecond
	vs, start := fillSharded(t, s, "r", set, 1000)
	inOrder := func(w, i int, admitted []string) error {
		if ordered(strategy) && !slices.IsSortedFunc(admitted, func(a, b string) int { return seqOf(a) - seqOf(b) }) {
			return fmt.Errorf("scheduler %d step %d admitted %v, out of arrival order", w, i, admitted)
		}
		return nil
	}
	got := slices.Concat(runSchedulers(t, s, "r", start, schedulers, steps, maxActive, inOrder)...)
	if len(got) <= maxActive {
		t.Fatalf("admitted %d visitors in total, want more than the cap %d (slots were freed)", len(got), maxActive)
	}
	slices.SortFunc(got, func(a, b string) int { return seqOf(a) - seqOf(b) })
	if c := slices.Compact(slices.Clone(got)); len(c) != len(got) {
		t.Fatalf("admitted %d visitors, %d of them distinct: someone was admitted twice", len(got), len(c))
	}
	if ordered(strategy) && !slices.Equal(got, vs[:len(got)]) {
		t.Errorf("admitted %d visitors, not the first arrivals (first 10: %v)", len(got), got[:10])
	}
}

// testShardedRate: 4 schedulers on one simulated clock admit at AdmitRate
// together: never above it, and at most 10 % below. (A sharded step
// reserves its tokens first and gives back what it did not use at its
// commit; when two steps plan the same heads, one gives back, and what a
// full bucket cannot take back is lost: about 3 % here, where Run's
// one-script stores lose nothing.)
func testShardedRate(t *testing.T, s queue.Store, strategy queue.ShardStrategy) {
	const rate = 200.0
	set := shardedSettings(strategy, 1e6, rate) // batch 20 per 100 ms
	_, start := fillSharded(t, s, "r", set, 3000)
	elapsed := admitTogether(t, s, "r", start) // 10 s
	st := mustStats(t, s, "r", start)
	want := rate*elapsed.Seconds() + float64(set.Batch()) // the bucket starts full
	if got := float64(st.AdmittedTotal); got < 0.9*want || got > want {
		t.Errorf("4 schedulers admitted %v in %v, want at most %v and at least 90 %% of it (rate %v/s)", got, elapsed, want, rate)
	}
	if st.Waiting != 3000-st.AdmittedTotal {
		t.Errorf("waiting = %d after %d admitted of 3000", st.Waiting, st.AdmittedTotal)
	}
}

func testShardedLeave(t *testing.T, s queue.Store, strategy queue.ShardStrategy) {
	ctx := context.Background()
	set := shardedSettings(strategy, 1, 10)
	_, now := fillSharded(t, s, "r", set, 8)
	res := mustAdmit(t, s, "r", now)
	if len(res.Admitted) != 1 || (ordered(strategy) && res.Admitted[0] != "v1") {
		t.Fatalf("first step admitted %v, want one (v1)", res.Admitted)
	}
	active, waiting := res.Admitted[0], "v5"
	if active == waiting {
		waiting = "v4"
	}
	for _, v := range []string{active, waiting, "never-entered"} {
		if err := s.Leave(ctx, "r", v); err != nil {
			t.Fatalf("Leave(%s): %v", v, err)
		}
		if e := mustStatus(t, s, "r", v, now); e.Status != queue.Gone {
			t.Errorf("Status(%s) after leaving = %+v, want gone", v, e)
		}
	}
	if e := mustStatus(t, s, "r", "v6", now); ordered(strategy) && e.Position != 4 {
		t.Errorf("v6 position after v1 and v5 left = %d, want 4", e.Position)
	}
	st := mustStats(t, s, "r", now)
	if st.Active != 0 || st.Waiting != 6 {
		t.Errorf("stats after leaves = %+v, want 0 active, 6 waiting", st)
	}
	if res := mustAdmit(t, s, "r", now.Add(time.Second)); len(res.Admitted) != 1 || (ordered(strategy) && res.Admitted[0] != "v2") {
		t.Errorf("after the active visitor left admitted %v, want one (v2) at once", res.Admitted)
	}
}

// testShardedStates: a paused room takes entries and admits nobody; a
// closed or sold-out one refuses newcomers (a waiting visitor keeps its
// place) and admits nobody; reopened, it admits.
func testShardedStates(t *testing.T, s queue.Store, strategy queue.ShardStrategy) {
	ctx := context.Background()
	set := shardedSettings(strategy, 10, 100)
	vs, now := fillSharded(t, s, "r", set, 12) // over every shard
	set.State = queue.Paused
	mustPut(t, s, "r", set)
	if e := mustEnter(t, s, "r", "a", now); e.Status != queue.Waiting {
		t.Fatalf("Enter into a paused room = %+v, want waiting", e)
	}
	if res := mustAdmit(t, s, "r", now.Add(time.Second)); len(res.Admitted) != 0 {
		t.Fatalf("paused room admitted %v", res.Admitted)
	}
	for i, state := range []queue.RoomState{queue.Closed, queue.SoldOut} {
		set.State = state
		mustPut(t, s, "r", set)
		for j := range 12 { // newcomers of every shard
			if _, _, err := s.Enter(ctx, "r", fmt.Sprintf("new%d-%d", i, j), now, queue.EnterOptions{}); !errors.Is(err, queue.ErrRoomClosed) {
				t.Errorf("Enter into a %s room: err = %v, want ErrRoomClosed", state, err)
			}
		}
		for _, v := range vs {
			if e := mustEnter(t, s, "r", v, now); e.Status != queue.Waiting {
				t.Errorf("re-Enter of waiting %s into a %s room = %+v, want its place", v, state, e)
			}
		}
		if res := mustAdmit(t, s, "r", now.Add(time.Duration(2+i)*time.Second)); len(res.Admitted) != 0 {
			t.Errorf("%s room admitted %v", state, res.Admitted)
		}
	}
	set.State = queue.Open
	mustPut(t, s, "r", set)
	// Under estimate a step takes its share from each shard, fewer when a
	// shard has fewer: at least one, at most the cap.
	res := mustAdmit(t, s, "r", now.Add(5*time.Second))
	n := int64(len(res.Admitted))
	if (ordered(strategy) && !slices.Equal(res.Admitted, vs[:10])) || n < 1 || n > 10 {
		t.Errorf("reopened room admitted %v, want the first 10", res.Admitted)
	}
	if st := mustStats(t, s, "r", now.Add(5*time.Second)); !reflect.DeepEqual(st.Settings, set) || st.Waiting != 13-n || st.Active != n {
		t.Errorf("stats = %+v, want %d waiting, %d active and the settings %+v", st, 13-n, n, set)
	}
}

// testShardedInventory: a sharded room follows its inventory as a room of
// one shard does (testInventoryCap, testInventorySoldOut): admission keeps
// below ceil(VisitorsPerUnit × units); at 0 newcomers of every shard are
// refused, the waiting keep their places and nobody is admitted, until
// units come back.
func testShardedInventory(t *testing.T, s queue.Store, strategy queue.ShardStrategy) {
	ctx := context.Background()
	set := shardedSettings(strategy, 10, 1000)
	set.VisitorsPerUnit = 1.5
	vs, now := fillSharded(t, s, "r", set, 20)
	mustSetInventory(t, s, "r", 3) // ceil(1.5 × 3) = 5
	if res := mustAdmit(t, s, "r", now); len(res.Admitted) != 5 || ordered(strategy) && !slices.Equal(res.Admitted, vs[:5]) {
		t.Errorf("admitted with 3 units left = %v, want 5 (the first 5 in order)", res.Admitted)
	}
	if res := mustAdmit(t, s, "r", now.Add(time.Second)); len(res.Admitted) != 0 {
		t.Errorf("admitted past the inventory cap: %v", res.Admitted)
	}
	mustSetInventory(t, s, "r", 0)
	if st := mustStats(t, s, "r", now); st.EffectiveState() != queue.SoldOut || st.Inventory != (queue.Inventory{Known: true}) {
		t.Errorf("with no units left: effective state %s, inventory %+v; want sold_out, 0", st.EffectiveState(), st.Inventory)
	}
	for j := range 12 { // newcomers of every shard
		if _, _, err := s.Enter(ctx, "r", fmt.Sprintf("new%d", j), now, queue.EnterOptions{}); !errors.Is(err, queue.ErrRoomClosed) {
			t.Errorf("Enter into a room without units: err = %v, want ErrRoomClosed", err)
		}
	}
	if e := mustEnter(t, s, "r", vs[19], now); e.Status != queue.Waiting {
		t.Errorf("re-Enter of a waiting visitor into a room without units = %+v, want its place", e)
	}
	mustSetInventory(t, s, "r", 100) // the cap is max_active again
	if res := mustAdmit(t, s, "r", now.Add(2*time.Second)); len(res.Admitted) != 5 {
		t.Errorf("admitted once units came back = %v, want 5 (max_active 10)", res.Admitted)
	}
	if e := mustEnter(t, s, "r", "late", now.Add(2*time.Second)); e.Status != queue.Waiting {
		t.Errorf("Enter once units came back = %+v, want waiting", e)
	}
}

// testShardedAdaptive: an adaptive sharded room admits at the rate its
// controller stored, as a room of one shard does (testAdaptiveRate), and
// a switch back to adaptive starts the controller afresh.
func testShardedAdaptive(t *testing.T, s queue.Store, strategy queue.ShardStrategy) {
	ctx := context.Background()
	set := shardedSettings(strategy, 1e6, 10)
	set.Interval = time.Second
	set.Admission, set.MinAdmitRate, set.MaxAdmitRate = queue.Adaptive, 1, 100
	_, now := fillSharded(t, s, "r", set, 60)
	if got := len(mustAdmit(t, s, "r", now).Admitted); got != 10 {
		t.Errorf("first step before any control: admitted %d, want admit_rate's batch 10", got)
	}
	cs := s.(queue.ControlStore)
	if ok, err := cs.SetControl(ctx, "r", queue.Control{Rate: 2, Version: 1, At: now}, queue.Signals{}); err != nil || !ok {
		t.Fatalf("SetControl = %v, %v; want stored", ok, err)
	}
	if c := mustStats(t, s, "r", now).Control; c.Rate != 2 || c.Version != 1 {
		t.Errorf("Stats.Control after SetControl = %+v, want rate 2, version 1", c)
	}
	mustAdmit(t, s, "r", now)
	var n int
	for range 10 {
		now = now.Add(time.Second)
		n += len(mustAdmit(t, s, "r", now).Admitted)
	}
	if n != 20 {
		t.Errorf("stored rate 2/s: admitted %d in 10 s, want 20", n)
	}
	set.Admission = queue.Static
	mustPut(t, s, "r", set)
	set.Admission = queue.Adaptive
	mustPut(t, s, "r", set)
	if c := mustStats(t, s, "r", now).Control; c.Rate != 0 || c.Version != 2 {
		t.Errorf("Control after a switch back to adaptive = %+v, want afresh at version 2", c)
	}
}

// testShardedQueueing: a sharded reject room refuses newcomers on every
// shard and admits those waiting; passthrough admits the line past
// max_active at the next step; the random draw is refused.
func testShardedQueueing(t *testing.T, s queue.Store, strategy queue.ShardStrategy) {
	ctx := context.Background()
	set := shardedSettings(strategy, 2, 1000)
	vs, now := fillSharded(t, s, "r", set, 6)
	set.Queueing = queue.QueueReject
	mustPut(t, s, "r", set)
	for j := range 12 { // newcomers of every shard
		if _, _, err := s.Enter(ctx, "r", fmt.Sprintf("new%d", j), now, queue.EnterOptions{}); !errors.Is(err, queue.ErrRoomClosed) {
			t.Errorf("Enter of a newcomer into a reject room: err = %v, want ErrRoomClosed", err)
		}
	}
	if e := mustEnter(t, s, "r", vs[5], now); e.Status != queue.Waiting {
		t.Errorf("re-Enter of a waiting visitor into a reject room = %+v, want its place", e)
	}
	if res := mustAdmit(t, s, "r", now); len(res.Admitted) != 2 {
		t.Errorf("a reject room's step admitted %v, want 2 (max_active)", res.Admitted)
	}
	set.Queueing = queue.QueuePassthrough
	mustPut(t, s, "r", set)
	if res := mustAdmit(t, s, "r", now.Add(time.Second)); len(res.Admitted) != 4 {
		t.Errorf("a passthrough room's step admitted %v, want the other 4, past max_active", res.Admitted)
	}
	if st := mustStats(t, s, "r", now.Add(time.Second)); st.Active != 6 || st.Waiting != 0 {
		t.Errorf("passthrough: %d active, %d waiting; want 6 and 0", st.Active, st.Waiting)
	}
	set.Queueing = queue.QueueRandom
	if _, err := s.PutRoom(ctx, "r", set, queue.PutOptions{}); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("PutRoom of a random sharded room: %v, want ErrInvalid", err)
	}
}
