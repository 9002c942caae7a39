package redisroute_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"usher/internal/queue"
	"usher/internal/queue/queuetest"
	"usher/internal/queue/redisroute"
	"usher/internal/testenv"
)

// TestConformanceSharded runs the sharded part of the suite on rooms of
// four shards, each strategy, on the Redis of USHER_TEST_REDIS and the
// cluster of USHER_TEST_REDIS_CLUSTER (where the shards' hash tags spread
// over the primaries).
func TestConformanceSharded(t *testing.T) {
	for _, target := range []struct{ name, env string }{{"single", "USHER_TEST_REDIS"}, {"cluster", "USHER_TEST_REDIS_CLUSTER"}} {
		t.Run(target.name, func(t *testing.T) {
			c := testenv.RedisAt(t, target.env)
			newStore := func(tb testing.TB) queue.Store { return redisroute.New(c, testenv.RedisPrefix(tb, c)) }
			for _, strategy := range queue.ShardStrategies {
				t.Run(string(strategy), func(t *testing.T) { queuetest.RunSharded(t, newStore, strategy) })
			}
		})
	}
}

// shardedRoom is a paused room of four shards (timestamp) holding v1…v8,
// entered a millisecond apart from t0 through s.
func shardedRoom(t *testing.T, s queue.Store, room string, t0 time.Time) queue.Settings {
	t.Helper()
	set := queue.DefaultSettings()
	set.State, set.Shards, set.PresenceTimeout, set.VisitorsPerUnit, set.ClaimWindow = queue.Paused, 4, 0, 0, set.ActiveTTL
	ctx := context.Background()
	if _, err := s.PutRoom(ctx, room, set, queue.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if _, _, err := s.Enter(ctx, room, fmt.Sprintf("v%d", i+1), t0.Add(time.Duration(i)*time.Millisecond), queue.EnterOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return set
}

// TestShardedLearned: an instance that has not seen a room yet learns
// that it is sharded from whichever call reaches it first (redisqueue
// does not know the room and writes nothing; the Router then asks the
// sharded store), and then serves it as the instance that made it.
func TestShardedLearned(t *testing.T) {
	c := testenv.Redis(t)
	ctx := context.Background()
	prefix := testenv.RedisPrefix(t, c)
	t0 := time.UnixMilli(1_900_000_000_000)
	set := shardedRoom(t, redisroute.New(c, prefix), "hot", t0)
	fresh := func() *redisroute.Router { return redisroute.New(c, prefix) }
	now := t0.Add(time.Second)

	if e, err := fresh().Status(ctx, "hot", "v3", now); err != nil || e.Status != queue.Waiting || e.Position != 3 {
		t.Errorf("Status through a fresh store = %+v, %v; want waiting at 3", e, err)
	}
	if e, created, err := fresh().Enter(ctx, "hot", "v9", now, queue.EnterOptions{}); err != nil || !created || e.Status != queue.Waiting {
		t.Errorf("Enter through a fresh store = %+v, %v, %v; want a new place", e, created, err)
	}
	if err := fresh().Leave(ctx, "hot", "v2"); err != nil {
		t.Fatal(err)
	}
	set.State = queue.Open
	if _, err := fresh().PutRoom(ctx, "hot", set, queue.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := fresh().Admit(ctx, "hot", now)
	if want := []string{"v1", "v3", "v4", "v5", "v6", "v7", "v8", "v9"}; err != nil || fmt.Sprint(res.Admitted) != fmt.Sprint(want) {
		t.Errorf("Admit through a fresh store = %+v, %v; want %v", res, err, want)
	}
	st, err := fresh().Stats(ctx, "hot", now)
	if err != nil || st.Waiting != 0 || st.Active != 8 || st.AdmittedTotal != 8 || st.Settings != set {
		t.Errorf("Stats through a fresh store = %+v, %v; want 8 active, none waiting", st, err)
	}
}

// TestShardedRefusals: what a sharded room does not have yet is refused,
// changing nothing: deletion.
func TestShardedRefusals(t *testing.T) {
	c := testenv.Redis(t)
	ctx := context.Background()
	prefix := testenv.RedisPrefix(t, c)
	t0 := time.UnixMilli(1_900_000_000_000)
	maker := redisroute.New(c, prefix)
	shardedRoom(t, maker, "hot", t0)
	for name, s := range map[string]*redisroute.Router{"its maker": maker, "a fresh store": redisroute.New(c, prefix)} {
		if err := s.DeleteRoom(ctx, "hot", true, t0); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("DeleteRoom through %s = %v, want ErrInvalid", name, err)
		}
	}
	st, err := redisroute.New(c, prefix).Stats(ctx, "hot", t0)
	if err != nil || st.Waiting != 8 {
		t.Errorf("Stats after the refusals = %+v, %v; want the room as it was (8 waiting)", st, err)
	}
}

// TestWakesReachOtherInstances: two instances share a Redis; the second
// reads a room nobody waits in only once an hour (IdleRefresh), yet a
// change of the room's settings through the first reaches its view at
// once, for a room of one shard and for a sharded one, and so do an
// inventory set, a room made and a room deleted through the first.
func TestWakesReachOtherInstances(t *testing.T) {
	c := testenv.Redis(t)
	prefix := testenv.RedisPrefix(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := queue.New(redisroute.New(c, prefix), queue.Options{IdleRefresh: time.Hour})
	b := queue.New(redisroute.New(c, prefix), queue.Options{IdleRefresh: time.Hour, Refresh: 10 * time.Millisecond})
	plain, sharded := queue.DefaultSettings(), queue.DefaultSettings()
	sharded.Shards = 3
	for room, set := range map[string]queue.Settings{"plain": plain, "hot": sharded} {
		set.State = queue.Paused
		if err := a.PutRoom(ctx, room, set); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	defer func() { cancel(); <-done }()
	state := func(room string) queue.RoomState {
		v, _ := b.View(room)
		return v.Settings.State
	}
	testenv.Eventually(t, 30*time.Second, "the second instance sees both rooms", func() bool {
		return state("plain") == queue.Paused && state("hot") == queue.Paused
	})
	// The subscription may start after the first PUT: PUT until it wakes.
	for room, set := range map[string]queue.Settings{"plain": plain, "hot": sharded} {
		set.State = queue.Open
		testenv.Eventually(t, 30*time.Second, room+" opened in the second instance's view", func() bool {
			if err := a.PutRoom(ctx, room, set); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
			return state(room) == queue.Open
		})
	}
	if err := a.SetInventory(ctx, "plain", 0); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the inventory in the second instance's view", func() bool {
		v, _ := b.View("plain")
		return v.Inventory.Known && v.EffectiveState() == queue.SoldOut
	})
	// The second reads its room list once per IdleRefresh too: a room made
	// and one deleted through the first reach its view by wakes alone.
	if err := a.PutRoom(ctx, "late", plain); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "a room made through the first in the second's view", func() bool {
		_, ok := b.View("late")
		return ok
	})
	if err := a.DeleteRoom(ctx, "plain", true); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "a room deleted through the first gone from the second's view", func() bool {
		_, ok := b.View("plain")
		return !ok
	})
}
