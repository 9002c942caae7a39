package redisshard_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"usher/internal/queue/redisshard"
	"usher/internal/testenv"
)

// TestKeySlot checks KeySlot against the cluster's own CLUSTER KEYSLOT,
// hash tags and keys without one alike.
func TestKeySlot(t *testing.T) {
	c := testenv.RedisAt(t, "USHER_TEST_REDIS_CLUSTER")
	ctx := context.Background()
	keys := []string{"", "a", "{}", "{}x", "x{}", "{a}", "p:{hot}:meta", "p:{hot#7}:wait", "{a}{b}", "a{b", "a}b{c}"}
	for range 200 {
		keys = append(keys, fmt.Sprintf("usher:{room-%d#%d}:wait", rand.IntN(1e6), rand.IntN(100)))
	}
	for _, k := range keys {
		want, err := c.Do(ctx, c.B().ClusterKeyslot().Key(k).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if got := redisshard.KeySlot(k); got != int(want) {
			t.Errorf("KeySlot(%q) = %d, want %d", k, got, want)
		}
	}
}

// TestShardsOnDistinctPrimaries makes rooms of 3 shards (and one of 6) on
// the three-primary cluster: each room's shards land on the three
// primaries, two each for 6, whatever the room's name; before, shard i's
// tag was {<room>#i}, and "hot" put its three on one primary.
func TestShardsOnDistinctPrimaries(t *testing.T) {
	c := testenv.RedisAt(t, "USHER_TEST_REDIS_CLUSTER")
	ctx := context.Background()
	s := redisshard.New(c, testenv.RedisPrefix(t, c), 0)
	for _, tc := range []struct {
		room   string
		shards int
	}{{"hot", 3}, {"sale", 3}, {"concert-2026", 3}, {"wide", 6}} {
		set := redisshard.DefaultSettings()
		set.Shards, set.Strategy = tc.shards, redisshard.Timestamp
		if err := s.PutRoom(ctx, tc.room, set); err != nil {
			t.Fatal(err)
		}
		count := map[string]int{}
		for i := range tc.shards {
			owner, err := testenv.SlotOwner(ctx, c, redisshard.KeySlot(s.WaitKey(tc.room, i)))
			if err != nil {
				t.Fatal(err)
			}
			count[owner]++
		}
		if got := slices.Sorted(func(yield func(int) bool) {
			for _, n := range count {
				yield(n)
			}
		}); !slices.Equal(got, []int{tc.shards / 3, tc.shards / 3, tc.shards / 3}) {
			t.Errorf("room %s of %d shards: shards per primary %v, want %d on each of 3", tc.room, tc.shards, count, tc.shards/3)
		}
		// The choice is the room's: a second store reads it, and a PUT
		// keeps it.
		other := redisshard.New(c, s.Prefix(), 0)
		if err := other.PutRoom(ctx, tc.room, set); err != nil {
			t.Fatalf("PUT again from another store: %v", err)
		}
		for i := range tc.shards {
			if _, _, err := other.Enter(ctx, tc.room, fmt.Sprintf("v%d", i), time.Now()); err != nil {
				t.Fatal(err)
			}
			if a, b := s.WaitKey(tc.room, i), other.WaitKey(tc.room, i); a != b {
				t.Errorf("room %s shard %d: %s here, %s on another store", tc.room, i, a, b)
			}
		}
	}
}
