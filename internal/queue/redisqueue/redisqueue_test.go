package redisqueue_test

import (
	"context"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/queue/queuetest"
	"usher/internal/queue/redisqueue"
	"usher/internal/testenv"
)

// openClient connects to USHER_TEST_REDIS (skipping when unset outside CI).
func openClient(tb testing.TB) rueidis.Client { return testenv.Redis(tb) }

// newStoreFunc returns a queuetest.NewStore whose every store has a fresh
// prefix, deleted when its test ends, and acknowledges writes as ack says.
func newStoreFunc(c rueidis.Client, ack ...redisqueue.Ack) queuetest.NewStore {
	return func(tb testing.TB) queue.Store {
		prefix := testenv.RedisPrefix(tb, c)
		s := redisqueue.New(c, prefix)
		for _, a := range ack {
			s.SetAck(a)
		}
		return s
	}
}

func TestConformance(t *testing.T) {
	queuetest.Run(t, newStoreFunc(openClient(t)))
}

// TestConformanceSentinel runs the suite through the sentinels of
// USHER_TEST_REDIS_SENTINEL (scripts/sentinel.sh), as usher does with a
// Sentinel URL in --store: each write acknowledged once a replica has it
// (within 2 s, not the default 100 ms: a loaded test machine's replica
// may lag that, and the suite is about behaviour, not timing).
func TestConformanceSentinel(t *testing.T) {
	ack := redisqueue.DefaultAck
	ack.Timeout = 2 * time.Second
	queuetest.Run(t, newStoreFunc(testenv.RedisAt(t, "USHER_TEST_REDIS_SENTINEL"), ack))
}

// TestConformanceCluster runs the suite on the Redis Cluster of
// USHER_TEST_REDIS_CLUSTER (scripts/cluster.sh), as usher does with a
// cluster URL in --store: every script's keys share one hash tag, so one
// slot, or the cluster refuses it (CROSSSLOT).
func TestConformanceCluster(t *testing.T) {
	queuetest.Run(t, newStoreFunc(testenv.RedisAt(t, "USHER_TEST_REDIS_CLUSTER")))
}

func BenchmarkStore(b *testing.B) {
	queuetest.Bench(b, newStoreFunc(openClient(b)))
}

// BenchmarkStoreCluster is BenchmarkStore on the cluster of
// USHER_TEST_REDIS_CLUSTER: one room, so one primary, reached through the
// cluster client (docs/benchmarks.md#redis-cluster-throughput).
func BenchmarkStoreCluster(b *testing.B) {
	queuetest.Bench(b, newStoreFunc(testenv.RedisAt(b, "USHER_TEST_REDIS_CLUSTER")))
}

// TestKeys pins the key layout that docs, scripts/bench-redis.sh and
// operators rely on: one hash tag per room, nothing per visitor.
func TestKeys(t *testing.T) {
	c := openClient(t)
	ctx := context.Background()
	prefix := testenv.RedisPrefix(t, c)
	s := redisqueue.New(c, prefix)
	set := queue.DefaultSettings()
	set.State = queue.Paused
	if _, err := s.PutRoom(ctx, "r1", set, queue.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, v := range []string{"a", "b", "c"} {
		if _, _, err := s.Enter(ctx, "r1", v, now, queue.EnterOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	set.State = queue.Open
	if _, err := s.PutRoom(ctx, "r1", set, queue.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Admit(ctx, "r1", now); err != nil {
		t.Fatal(err)
	}
	keys, err := c.Do(ctx, c.B().Keys().Pattern(prefix+"*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		prefix + "rooms":       true,
		prefix + "{r1}:meta":   true,
		prefix + "{r1}:active": true,
		prefix + "{r1}:wait":   false, // emptied by the admission step
	}
	got := map[string]bool{}
	for _, k := range keys {
		got[k] = true
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected key %q", k)
		}
	}
	for k, present := range want {
		if got[k] != present {
			t.Errorf("key %q present = %v, want %v", k, got[k], present)
		}
	}
}

func TestUnavailable(t *testing.T) {
	addr := testenv.ClosedAddr(t)
	// ForceSingleClient returns a client even though the first dial fails;
	// every command then redials and fails at once.
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{addr},
		ForceSingleClient: true,
		DisableRetry:      true,
		DisableCache:      true,
		Dialer:            net.Dialer{Timeout: time.Second},
		ConnWriteTimeout:  time.Second,
	})
	if c == nil {
		t.Fatalf("NewClient(%s): no client: %v", addr, err)
	}
	defer c.Close()
	s := redisqueue.New(c, "usher:")
	now := time.Now()
	checks := map[string]func(ctx context.Context) error{
		"PutRoom": func(ctx context.Context) error {
			_, err := s.PutRoom(ctx, "r", queue.DefaultSettings(), queue.PutOptions{})
			return err
		},
		"Rooms": func(ctx context.Context) error { _, err := s.Rooms(ctx); return err },
		"Enter": func(ctx context.Context) error {
			_, _, err := s.Enter(ctx, "r", "v", now, queue.EnterOptions{})
			return err
		},
		"Status": func(ctx context.Context) error { _, err := s.Status(ctx, "r", "v", now); return err },
		"Leave":  func(ctx context.Context) error { return s.Leave(ctx, "r", "v") },
		"Admit":  func(ctx context.Context) error { _, err := s.Admit(ctx, "r", now); return err },
		"Stats":  func(ctx context.Context) error { _, err := s.Stats(ctx, "r", now); return err },
	}
	for op, call := range checks {
		t.Run(op, func(t *testing.T) {
			// The deadline only guards against a hang: a prompt failure is
			// one that does not wait for it.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := call(ctx)
			if ctx.Err() != nil {
				t.Errorf("err = %v after the caller's deadline, want a failure of its own before it", err)
			}
			if !errors.Is(err, queue.ErrUnavailable) {
				t.Errorf("err = %v, want ErrUnavailable", err)
			}
			if errors.Is(err, queue.ErrRoomNotFound) || rueidis.IsRedisNil(err) {
				t.Errorf("err = %v, want only ErrUnavailable", err)
			}
		})
	}
}

// TestUnavailableTimeout checks that a server that accepts connections but
// never answers yields ErrUnavailable when the caller's deadline passes, with
// the context's error kept in the chain.
func TestUnavailableTimeout(t *testing.T) {
	c := testenv.SilentRedis(t)
	s := redisqueue.New(c, "usher:")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, _, err := s.Enter(ctx, "r", "v", time.Now(), queue.EnterOptions{})
	if !errors.Is(err, queue.ErrUnavailable) {
		t.Errorf("err = %v, want ErrUnavailable", err)
	}
}

// TestMatchesMemqueue runs one random sequence of operations against this
// store and memqueue, the reference, and wants the same answer to each. The
// clock moves in steps of 125 ms (exact in binary, so both token buckets see
// the same floats) and sometimes backwards, as a scheduler with a slow clock
// would.
func TestMatchesMemqueue(t *testing.T) {
	c := openClient(t)
	ctx := context.Background()
	redis := newStoreFunc(c)(t)
	mem := memqueue.New()
	rnd := mathrand.New(mathrand.NewPCG(1, 2))
	pick := func(xs ...int64) int64 { return xs[rnd.IntN(len(xs))] }
	now := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	rooms := []string{"a", "b", "missing"}
	putPaused(t, rooms[:2], redis, mem)
	for i := range 4000 {
		switch d := rnd.IntN(20); {
		case d == 0:
			now = now.Add(-125 * time.Millisecond)
		case d < 8:
			now = now.Add(time.Duration(rnd.IntN(8)) * 125 * time.Millisecond)
		}
		room := rooms[rnd.IntN(len(rooms))]
		if rnd.IntN(10) > 0 {
			room = rooms[rnd.IntN(2)]
		}
		visitor := fmt.Sprintf("v%d", rnd.IntN(40))
		var op string
		var got, want any
		switch r := rnd.IntN(100); {
		case r < 3:
			set := queue.Settings{
				State:       []queue.RoomState{queue.Open, queue.Open, queue.Paused, queue.Closed}[rnd.IntN(4)],
				MaxActive:   pick(1, 3, 8),
				AdmitRate:   float64(pick(2, 4, 16, 40)),
				Interval:    time.Duration(pick(250, 500, 1000)) * time.Millisecond,
				ActiveTTL:   time.Duration(pick(4, 8)) * time.Second,
				ClaimWindow: time.Duration(pick(1, 2, 4)) * time.Second,
				Shards:      1, ShardStrategy: queue.ShardTimestamp, // fixed
			}
			op = fmt.Sprintf("PutRoom(%s, %+v)", room, set)
			got, want = errKind(put(redis, room, set)), errKind(put(mem, room, set))
		case r < 45:
			op = fmt.Sprintf("Enter(%s, %s)", room, visitor)
			e1, c1, err1 := redis.Enter(ctx, room, visitor, now, queue.EnterOptions{})
			e2, c2, err2 := mem.Enter(ctx, room, visitor, now, queue.EnterOptions{})
			if !sameEntry(e1, e2) || c1 != c2 || errKind(err1) != errKind(err2) {
				got, want = fmt.Sprint(e1, c1, errKind(err1)), fmt.Sprint(e2, c2, errKind(err2))
			}
		case r < 75:
			op = fmt.Sprintf("Status(%s, %s)", room, visitor)
			e1, err1 := redis.Status(ctx, room, visitor, now)
			e2, err2 := mem.Status(ctx, room, visitor, now)
			if !sameEntry(e1, e2) || errKind(err1) != errKind(err2) {
				got, want = fmt.Sprint(e1, errKind(err1)), fmt.Sprint(e2, errKind(err2))
			}
		case r < 82:
			op = fmt.Sprintf("Leave(%s, %s)", room, visitor)
			got, want = errKind(redis.Leave(ctx, room, visitor)), errKind(mem.Leave(ctx, room, visitor))
		case r < 94:
			op = fmt.Sprintf("Admit(%s)", room)
			r1, err1 := redis.Admit(ctx, room, now)
			r2, err2 := mem.Admit(ctx, room, now)
			if !slices.Equal(r1.Admitted, r2.Admitted) || r1.Expired != r2.Expired || errKind(err1) != errKind(err2) {
				got, want = fmt.Sprint(r1, errKind(err1)), fmt.Sprint(r2, errKind(err2))
			}
		default:
			op = fmt.Sprintf("Stats(%s)", room)
			s1, err1 := redis.Stats(ctx, room, now)
			s2, err2 := mem.Stats(ctx, room, now)
			got, want = fmt.Sprint(s1, errKind(err1)), fmt.Sprint(s2, errKind(err2))
		}
		if got != want {
			t.Fatalf("op %d at +%v: %s = %v, memqueue says %v", i, now.Sub(time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)), op, got, want)
		}
	}
	// The sequence must have exercised admission, not only waiting.
	st, err := mem.Stats(ctx, "a", now)
	if err != nil || st.AdmittedTotal < 20 {
		t.Errorf("room a admitted %d (%v): the sequence does not exercise admission", st.AdmittedTotal, err)
	}
}

// TestAdmitLargeBatch admits more visitors in one step than one ZADD call
// takes in admit.lua, and wants them all, in order.
func TestAdmitLargeBatch(t *testing.T) {
	c := openClient(t)
	ctx := context.Background()
	s := newStoreFunc(c)(t)
	const n = 2500
	set := queue.DefaultSettings()
	set.MaxActive, set.AdmitRate, set.State = n, n, queue.Paused
	if _, err := s.PutRoom(ctx, "r", set, queue.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("v%d", i)
		if _, _, err := s.Enter(ctx, "r", want[i], now, queue.EnterOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	set.State = queue.Open
	if _, err := s.PutRoom(ctx, "r", set, queue.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Admit(ctx, "r", now)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Admitted, want) {
		t.Errorf("admitted %d visitors, want all %d in arrival order", len(res.Admitted), n)
	}
	st, err := s.Stats(ctx, "r", now)
	if err != nil {
		t.Fatal(err)
	}
	if st.Active != n || st.Waiting != 0 {
		t.Errorf("stats = %+v, want %d active and none waiting", st, n)
	}
}

// TestQueueStoreTimeoutOnHungRedis: the Queue's per-call deadline ends
// every store call on a Redis that never answers (and whose client never
// times out) with ErrUnavailable, under no deadline of the caller's.
func TestQueueStoreTimeoutOnHungRedis(t *testing.T) {
	q := queue.New(redisqueue.New(testenv.HungRedis(t), "usher:"), queue.Options{StoreTimeout: 100 * time.Millisecond})
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"PutRoom":      func() error { return q.PutRoom(ctx, "r", queue.DefaultSettings()) },
		"EnsureRoom":   func() error { _, err := q.EnsureRoom(ctx, "r", queue.DefaultSettings()); return err },
		"Rooms":        func() error { _, err := q.Rooms(ctx); return err },
		"Room":         func() error { _, err := q.Room(ctx, "r"); return err },
		"Enter":        func() error { _, _, err := q.Enter(ctx, "r", "v"); return err },
		"Status":       func() error { _, _, err := q.Status(ctx, "r", "v", 1, time.Now()); return err },
		"Renew":        func() error { _, err := q.Renew(ctx, "r", "v"); return err },
		"Leave":        func() error { return q.Leave(ctx, "r", "v") },
		"Admit":        func() error { _, err := q.Admit(ctx, "r"); return err },
		"SetInventory": func() error { return q.SetInventory(ctx, "r", 1) },
	} {
		if err := call(); !errors.Is(err, queue.ErrUnavailable) {
			t.Errorf("%s on a hung Redis: err = %v, want ErrUnavailable", name, err)
		}
	}
}

// TestRoomFromOldVersion: a room written by the version that passed settings
// to put_room.lua by position (the same hash field names, written here by
// hand) reads back (the read stores the limits it lacks), admits, and
// takes new settings.
func TestRoomFromOldVersion(t *testing.T) {
	c := openClient(t)
	ctx := context.Background()
	prefix := testenv.RedisPrefix(t, c)
	meta := prefix + "{old}:meta"
	err := c.Do(ctx, c.B().Hset().Key(meta).FieldValue().
		FieldValue("state", "open").FieldValue("max_active", "7").FieldValue("admit_rate", "2.5").
		FieldValue("interval", "200000000").FieldValue("active_ttl", "60000000000").
		FieldValue("claim_window", "10000000000").FieldValue("batch", "1").FieldValue("tokens", "1").
		FieldValue("seq", "0").FieldValue("admitted_total", "0").Build()).Error()
	if err == nil {
		err = c.Do(ctx, c.B().Sadd().Key(prefix+"rooms").Member("old").Build()).Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	s := redisqueue.New(c, prefix)
	now := time.UnixMilli(1_800_000_000_000)
	// Settings the old version did not have read as their defaults.
	want := queue.DefaultSettings()
	want.MaxActive, want.AdmitRate, want.Interval, want.ActiveTTL, want.ClaimWindow =
		7, 2.5, 200*time.Millisecond, time.Minute, 10*time.Second
	st, err := s.Stats(ctx, "old", now)
	if err != nil || st.Settings != want || st.LastSeq != 0 || st.HeadSeq != 1 {
		t.Fatalf("Stats of an old room = %+v, %v; want settings %+v, last seq 0, head 1", st, err, want)
	}
	if e, _, err := s.Enter(ctx, "old", "a", now, queue.EnterOptions{}); err != nil || e.Status != queue.Active {
		t.Fatalf("Enter = %+v, %v; want active (passthrough)", e, err)
	}
	// The cap follows the settings as Stats shows them: the default
	// visitors_per_unit, 2, of 3 units left.
	if err := s.SetInventory(ctx, "old", 3); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Do(ctx, c.B().Hget().Key(meta).Field("lim_cap").Build()).ToString(); err != nil || v != "6" {
		t.Errorf("lim_cap of an old room with 3 units left = %q, %v; want 6", v, err)
	}
	want.MaxActive = 9
	if _, err := s.PutRoom(ctx, "old", want, queue.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Stats(ctx, "old", now); err != nil || st.Settings != want || st.Active != 1 || st.LastSeq != 1 {
		t.Errorf("Stats after PutRoom = %+v, %v; want settings %+v, 1 active, last seq 1", st, err, want)
	}
}

// TestDeleteRoomKeys: a forced DeleteRoom leaves no key of the room and
// no member in the rooms set; another room's keys stay.
func TestDeleteRoomKeys(t *testing.T) {
	c := openClient(t)
	ctx := context.Background()
	prefix := testenv.RedisPrefix(t, c)
	s := redisqueue.New(c, prefix)
	set := queue.DefaultSettings()
	set.OpensAt = time.Now().Add(time.Hour).Truncate(time.Millisecond) // a pre-queue and a seed
	for _, room := range []string{"gone", "kept"} {
		if _, err := s.PutRoom(ctx, room, set, queue.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Enter(ctx, room, "v", time.Now(), queue.EnterOptions{}); err != nil {
			t.Fatal(err)
		}
		var sig queue.Signals // the adaptive controller's pool, a key of its own
		sig.Add(20*time.Millisecond, false)
		if _, err := s.AddSignals(ctx, room, sig); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteRoom(ctx, "gone", true, time.Now()); err != nil {
		t.Fatal(err)
	}
	keys, err := c.Do(ctx, c.B().Keys().Pattern(prefix+"{gone}*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("keys of the deleted room left: %v", keys)
	}
	members, err := c.Do(ctx, c.B().Smembers().Key(prefix+"rooms").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(members, []string{"kept"}) {
		t.Errorf("rooms set = %v, want [kept]", members)
	}
	if n, err := c.Do(ctx, c.B().Exists().Key(prefix+"{kept}:meta", prefix+"{kept}:pre").Build()).AsInt64(); err != nil || n != 2 {
		t.Errorf("keys of the other room: %d of 2 exist (%v)", n, err)
	}
}

// TestStaleLimits: limits older than their inputs (a writer that stopped
// between writing an input and storing the limits) make no passthrough,
// and the next step stores them anew and admits under them.
func TestStaleLimits(t *testing.T) {
	c := openClient(t)
	ctx := context.Background()
	prefix := testenv.RedisPrefix(t, c)
	s := redisqueue.New(c, prefix)
	now := time.UnixMilli(1_800_000_000_000)
	set := queue.DefaultSettings()
	set.MaxActive, set.AdmitRate, set.PresenceTimeout = 5, 100, 0
	if _, err := s.PutRoom(ctx, "r", set, queue.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetInventory(ctx, "r", 1); err != nil { // cap: 2 per unit
		t.Fatal(err)
	}
	// An input written, its limits not: the cap stored is still 5.
	meta := prefix + "{r}:meta"
	if err := c.Do(ctx, c.B().Hset().Key(meta).FieldValue().FieldValue("inventory", "2").FieldValue("lim_cap", "5").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, c.B().Hincrby().Key(meta).Field("rules_v").Increment(1).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if e, _, err := s.Enter(ctx, "r", "a", now, queue.EnterOptions{}); err != nil || e.Status != queue.Waiting {
		t.Fatalf("Enter on stale limits = %+v, %v; want waiting (no passthrough)", e, err)
	}
	for _, v := range []string{"b", "c", "d", "e", "f"} {
		if _, _, err := s.Enter(ctx, "r", v, now, queue.EnterOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Admit(ctx, "r", now.Add(time.Second))
	if err != nil || !slices.Equal(res.Admitted, []string{"a", "b", "c", "d"}) {
		t.Fatalf("Admit on stale limits = %+v, %v; want a-d (the cap of 2 units, 4)", res, err)
	}
	if v, err := c.Do(ctx, c.B().Hget().Key(meta).Field("lim_cap").Build()).ToString(); err != nil || v != "4" {
		t.Errorf("lim_cap after the step = %q, %v; want 4", v, err)
	}
}
