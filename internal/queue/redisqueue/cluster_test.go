package redisqueue_test

import (
	"context"
	"fmt"
	mathrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/queue"
	"usher/internal/queue/redisqueue"
	"usher/internal/testenv"
)

// TestRoomsSpreadOverPrimaries creates rooms on the cluster of
// USHER_TEST_REDIS_CLUSTER and checks, with CLUSTER NODES and CLUSTER
// KEYSLOT, that every key of a room is in one slot, that the key is stored
// on the primary serving that slot, and that the rooms land on all three
// primaries (with 60 rooms, a primary gets none with probability
// 3·(2/3)^60 ≈ 10⁻¹⁰).
func TestRoomsSpreadOverPrimaries(t *testing.T) {
	t.Parallel()
	c := testenv.RedisAt(t, "USHER_TEST_REDIS_CLUSTER")
	ctx := context.Background()
	prefix := testenv.RedisPrefix(t, c)
	s := redisqueue.New(c, prefix)
	owners := slotOwners(t, c)
	set := queue.DefaultSettings()
	set.MaxActive = 1 // a is admitted, b and c wait
	now := time.Now()
	const rooms = 60
	for i := range rooms {
		room := fmt.Sprintf("room-%d", i)
		if _, err := s.PutRoom(ctx, room, set, queue.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"a", "b", "c"} {
			if _, _, err := s.Enter(ctx, room, v, now, queue.EnterOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}

	perPrimary := map[string]int{}
	for i := range rooms {
		room := fmt.Sprintf("room-%d", i)
		base := prefix + "{" + room + "}:"
		slot := keySlot(t, c, base+"meta")
		owner := owners[slot]
		if owner == "" {
			t.Fatalf("no primary serves slot %d", slot)
		}
		// The owner itself (not the cluster client, which would follow a
		// MOVED) has the room's keys.
		node := c.Nodes()[owner]
		keys, err := node.Do(ctx, node.B().Keys().Pattern(escapeGlob(base)+"*").Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) < 3 {
			t.Errorf("%s: the primary %s of slot %d has %v, want the meta hash, the waiting and the active set", room, owner, slot, keys)
		}
		for _, k := range keys {
			if ks := keySlot(t, c, k); ks != slot {
				t.Errorf("%s: key %s is in slot %d, the room's meta in %d", room, k, ks, slot)
			}
		}
		perPrimary[owner]++
	}
	if len(perPrimary) != 3 {
		t.Errorf("%d rooms landed on %d primaries (%v), want all three", rooms, len(perPrimary), perPrimary)
	}
	t.Logf("rooms per primary: %v", perPrimary)
}

// BenchmarkEnterRooms measures Enter from 50 goroutines sharing one client
// over 30 paused rooms (every visitor waits), goroutine g entering room
// g mod 30: on the single Redis of USHER_TEST_REDIS and on the cluster of
// USHER_TEST_REDIS_CLUSTER, where the rooms spread over the three
// primaries (docs/benchmarks.md#redis-cluster-throughput).
func BenchmarkEnterRooms(b *testing.B) {
	for _, target := range []struct{ name, env string }{{"single", "USHER_TEST_REDIS"}, {"cluster", "USHER_TEST_REDIS_CLUSTER"}} {
		b.Run(target.name, func(b *testing.B) {
			const concurrency, rooms = 50, 30
			c := testenv.RedisAt(b, target.env)
			ctx := context.Background()
			s := newStoreFunc(c)(b)
			set := queue.DefaultSettings()
			set.State = queue.Paused
			for r := range rooms {
				if _, err := s.PutRoom(ctx, fmt.Sprintf("room-%d", r), set, queue.PutOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			now := time.Now()
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			b.ResetTimer()
			for g := range concurrency {
				room := fmt.Sprintf("room-%d", g%rooms)
				wg.Go(func() {
					var buf []byte
					for left.Add(-1) >= 0 {
						buf = fmt.Appendf(buf[:0], "v%012d", mathrand.IntN(1_000_000_000))
						if _, _, err := s.Enter(ctx, room, string(buf), now, queue.EnterOptions{}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "enters/s")
		})
	}
}

// slotOwners maps each of the 16384 slots to the address of its primary,
// read from CLUSTER NODES.
func slotOwners(tb testing.TB, c rueidis.Client) []string {
	tb.Helper()
	text, err := c.Do(context.Background(), c.B().ClusterNodes().Build()).ToString()
	if err != nil {
		tb.Fatal(err)
	}
	owners := make([]string, 16384)
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !strings.Contains(f[2], "master") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") { // a slot being migrated or imported
				continue
			}
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				tb.Fatalf("bad slot range %q in CLUSTER NODES", r)
			}
			for s := a; s <= b; s++ {
				owners[s] = addr
			}
		}
	}
	return owners
}

func keySlot(tb testing.TB, c rueidis.Client, key string) int {
	tb.Helper()
	n, err := c.Do(context.Background(), c.B().ClusterKeyslot().Key(key).Build()).AsInt64()
	if err != nil {
		tb.Fatal(err)
	}
	return int(n)
}

// escapeGlob escapes the glob characters of a KEYS pattern.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
