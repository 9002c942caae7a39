package redishold_test

import (
	"context"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/rueidis"

	"usher/internal/hold"
	"usher/internal/hold/holdtest"
	"usher/internal/hold/memhold"
	"usher/internal/hold/redishold"
	"usher/internal/testenv"
)

// openClient connects to USHER_TEST_REDIS (skipping when unset outside CI).
func openClient(tb testing.TB) rueidis.Client { return testenv.Redis(tb) }

// newStoreFunc returns a holdtest.NewStore whose every store has a fresh
// prefix, deleted when its test ends.
func newStoreFunc(c rueidis.Client) holdtest.NewStore {
	return func(tb testing.TB) hold.Store {
		prefix := testenv.RedisPrefix(tb, c)
		return redishold.New(c, prefix)
	}
}

func TestConformance(t *testing.T) {
	holdtest.Run(t, newStoreFunc(openClient(t)))
}

// TestConformanceSentinel runs the suite through the sentinels of
// USHER_TEST_REDIS_SENTINEL (scripts/sentinel.sh), as usher does with a
// Sentinel URL in --store.
func TestConformanceSentinel(t *testing.T) {
	holdtest.Run(t, newStoreFunc(testenv.RedisAt(t, "USHER_TEST_REDIS_SENTINEL")))
}

// TestConformanceCluster runs the suite on the Redis Cluster of
// USHER_TEST_REDIS_CLUSTER (scripts/cluster.sh), as usher does with a
// cluster URL in --store: every script's keys share one hash tag, so one
// slot, or the cluster refuses it (CROSSSLOT).
func TestConformanceCluster(t *testing.T) {
	holdtest.Run(t, newStoreFunc(testenv.RedisAt(t, "USHER_TEST_REDIS_CLUSTER")))
}

func BenchmarkStore(b *testing.B) {
	holdtest.Bench(b, newStoreFunc(openClient(b)))
}

// TestKeys pins the key layout that docs/architecture.md#the-hold-store documents: one hash
// tag per scope, a key per held seat, Redis expiry as garbage collection
// only (the hold's ttl plus GCMargin), nothing left of ended holds.
func TestKeys(t *testing.T) {
	c := openClient(t)
	ctx := context.Background()
	prefix := testenv.RedisPrefix(t, c)
	s := redishold.New(c, prefix)
	now := time.Now()
	const ttl = time.Minute
	seats, err := s.HoldSeats(ctx, "show", "alice", []string{"A-1", "A-2"}, 2, ttl, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetStock(ctx, "show", 10); err != nil {
		t.Fatal(err)
	}
	units, err := s.HoldStock(ctx, "show", "bob", 3, 3, ttl, now)
	if err != nil {
		t.Fatal(err)
	}
	base := prefix + "{show}:"
	wantKeys(t, c, prefix, base+"stock", base+"holds", base+"hold", base+"held", base+"seat:A-1", base+"seat:A-2")
	pttl := func(key string) time.Duration {
		ms, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(ms) * time.Millisecond
	}
	for _, k := range []string{"seat:A-1", "seat:A-2", "holds", "hold", "held"} {
		if d := pttl(base + k); d <= ttl+redishold.GCMargin-10*time.Second || d > ttl+redishold.GCMargin {
			t.Errorf("PTTL %s = %v, want about %v", k, d, ttl+redishold.GCMargin)
		}
	}
	if d := pttl(base + "stock"); d != -time.Millisecond {
		t.Errorf("PTTL stock = %v, want none (-1 ms)", d)
	}
	if owner, err := c.Do(ctx, c.B().Get().Key(base+"seat:A-1").Build()).ToString(); err != nil || owner != seats.ID {
		t.Errorf("seat:A-1 = %q (%v), want the hold id %q", owner, err, seats.ID)
	}

	if err := s.Release(ctx, "show", seats.ID, now); err != nil {
		t.Fatal(err)
	}
	if err := s.Consume(ctx, "show", units.ID, now); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, c, prefix, base+"stock")
	if n, err := c.Do(ctx, c.B().Get().Key(base+"stock").Build()).AsInt64(); err != nil || n != 7 {
		t.Errorf("stock = %d (%v), want 7", n, err)
	}
}

func wantKeys(t *testing.T, c rueidis.Client, prefix string, want ...string) {
	t.Helper()
	got, err := c.Do(context.Background(), c.B().Keys().Pattern(prefix+"*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("keys = %q, want %q", got, want)
	}
}

// TestLostHolds drops a scope's hold keys, as Redis does when their PX runs
// out before any call reclaims them: the units come back, and a seat key
// naming a vanished hold is free.
func TestLostHolds(t *testing.T) {
	c := openClient(t)
	ctx := context.Background()
	prefix := testenv.RedisPrefix(t, c)
	s := redishold.New(c, prefix)
	now := time.Now()
	if err := s.SetStock(ctx, "show", 10); err != nil {
		t.Fatal(err)
	}
	units, err := s.HoldStock(ctx, "show", "alice", 4, 4, time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	seats, err := s.HoldSeats(ctx, "show", "alice", []string{"A-1"}, 1, time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	base := prefix + "{show}:"
	if err := c.Do(ctx, c.B().Del().Key(base+"holds", base+"hold", base+"held").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Stock(ctx, "show", now); err != nil || n != 10 {
		t.Errorf("Stock = %d (%v), want all 10 back", n, err)
	}
	if _, err := s.HoldSeats(ctx, "show", "bob", []string{"A-1"}, 1, time.Minute, now); err != nil {
		t.Errorf("HoldSeats of a seat whose hold vanished: %v", err)
	}
	for _, id := range []string{units.ID, seats.ID} {
		if _, err := s.Get(ctx, "show", id, now); !errors.Is(err, hold.ErrNotFound) {
			t.Errorf("Get of a vanished hold: err = %v, want ErrNotFound", err)
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
	s := redishold.New(c, "usher:")
	now := time.Now()
	checks := map[string]func(ctx context.Context) error{
		"HoldSeats": func(ctx context.Context) error {
			_, err := s.HoldSeats(ctx, "show", "alice", []string{"A-1"}, 4, time.Minute, now)
			return err
		},
		"HoldStock": func(ctx context.Context) error {
			_, err := s.HoldStock(ctx, "show", "alice", 1, 4, time.Minute, now)
			return err
		},
		"Get":       func(ctx context.Context) error { _, err := s.Get(ctx, "show", "id", now); return err },
		"Release":   func(ctx context.Context) error { return s.Release(ctx, "show", "id", now) },
		"Consume":   func(ctx context.Context) error { return s.Consume(ctx, "show", "id", now) },
		"HeldSeats": func(ctx context.Context) error { _, err := s.HeldSeats(ctx, "show", now); return err },
		"SetStock":  func(ctx context.Context) error { return s.SetStock(ctx, "show", 10) },
		"Stock":     func(ctx context.Context) error { _, err := s.Stock(ctx, "show", now); return err },
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
			if !errors.Is(err, hold.ErrUnavailable) {
				t.Errorf("err = %v, want ErrUnavailable", err)
			}
			if errors.Is(err, hold.ErrNotFound) || rueidis.IsRedisNil(err) {
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
	s := redishold.New(c, "usher:")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := s.HoldSeats(ctx, "show", "alice", []string{"A-1"}, 4, time.Minute, time.Now())
	if !errors.Is(err, hold.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want ErrUnavailable with DeadlineExceeded", err)
	}
}

// TestMatchesMemhold runs one random sequence of operations against this
// store and memhold, the reference, and wants the same answer to each. The
// clock moves in steps of 250 ms, sometimes backwards, and holds last 1 to
// 5 s, so that holds expire while others are live.
func TestMatchesMemhold(t *testing.T) {
	c := openClient(t)
	ctx := context.Background()
	redis := newStoreFunc(c)(t)
	mem := memhold.New()
	rnd := mathrand.New(mathrand.NewPCG(1, 2))
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	now := t0
	scopes := []string{"a", "b"}
	type pair struct{ scope, redis, mem string }
	var ids []pair
	kinds := map[string]int{}
	kind := func(err error) string {
		var te *hold.TakenError
		switch {
		case err == nil:
			return "ok"
		case errors.As(err, &te):
			return "taken " + strings.Join(te.Seats, ",")
		case errors.Is(err, hold.ErrNotFound):
			return "not found"
		case errors.Is(err, hold.ErrLimit):
			return "limit"
		case errors.Is(err, hold.ErrSoldOut):
			return "sold out"
		}
		return err.Error()
	}
	sameHold := func(a, b hold.Hold) bool {
		a.ID, b.ID = "", ""
		return cmp.Equal(a, b, cmpopts.EquateEmpty())
	}
	pick := func() pair {
		if len(ids) == 0 || rnd.IntN(20) == 0 {
			return pair{scopes[rnd.IntN(2)], "bogus", "bogus"}
		}
		return ids[rnd.IntN(len(ids))]
	}
	for i := range 5000 {
		switch d := rnd.IntN(10); {
		case d == 0:
			now = now.Add(-250 * time.Millisecond)
		case d < 5:
			now = now.Add(time.Duration(rnd.IntN(4)) * 250 * time.Millisecond)
		}
		scope := scopes[rnd.IntN(2)]
		holder := fmt.Sprint("h", rnd.IntN(3))
		ttl := time.Duration(1+rnd.IntN(5)) * time.Second
		var op, got, want string
		switch r := rnd.IntN(100); {
		case r < 35:
			seats := make([]string, 1+rnd.IntN(3))
			for j := range seats {
				seats[j] = fmt.Sprint("s", rnd.IntN(10))
			}
			limit := 2 + rnd.IntN(4)
			op = fmt.Sprintf("HoldSeats(%s, %s, %v, %d, %v)", scope, holder, seats, limit, ttl)
			h1, err1 := redis.HoldSeats(ctx, scope, holder, seats, limit, ttl, now)
			h2, err2 := mem.HoldSeats(ctx, scope, holder, seats, limit, ttl, now)
			got, want = kind(err1), kind(err2)
			kinds["seats "+strings.Fields(want)[0]]++
			if got == want && err1 == nil {
				if !sameHold(h1, h2) {
					got, want = fmt.Sprint(h1), fmt.Sprint(h2)
				}
				ids = append(ids, pair{scope, h1.ID, h2.ID})
			}
		case r < 50:
			n, limit := 1+rnd.Int64N(3), 2+rnd.Int64N(5)
			op = fmt.Sprintf("HoldStock(%s, %s, %d, %d, %v)", scope, holder, n, limit, ttl)
			h1, err1 := redis.HoldStock(ctx, scope, holder, n, limit, ttl, now)
			h2, err2 := mem.HoldStock(ctx, scope, holder, n, limit, ttl, now)
			got, want = kind(err1), kind(err2)
			kinds["stock "+want]++
			if got == want && err1 == nil {
				if !sameHold(h1, h2) {
					got, want = fmt.Sprint(h1), fmt.Sprint(h2)
				}
				ids = append(ids, pair{scope, h1.ID, h2.ID})
			}
		case r < 53:
			total := []int64{0, 3, 10}[rnd.IntN(3)]
			op = fmt.Sprintf("SetStock(%s, %d)", scope, total)
			got, want = kind(redis.SetStock(ctx, scope, total)), kind(mem.SetStock(ctx, scope, total))
		case r < 65:
			p := pick()
			op = fmt.Sprintf("Get(%s, %s)", p.scope, p.mem)
			h1, err1 := redis.Get(ctx, p.scope, p.redis, now)
			h2, err2 := mem.Get(ctx, p.scope, p.mem, now)
			got, want = kind(err1), kind(err2)
			kinds["get "+want]++
			if got == want && err1 == nil && !sameHold(h1, h2) {
				got, want = fmt.Sprint(h1), fmt.Sprint(h2)
			}
		case r < 75:
			p := pick()
			op = fmt.Sprintf("Release(%s, %s)", p.scope, p.mem)
			got, want = kind(redis.Release(ctx, p.scope, p.redis, now)), kind(mem.Release(ctx, p.scope, p.mem, now))
		case r < 83:
			p := pick()
			op = fmt.Sprintf("Consume(%s, %s)", p.scope, p.mem)
			got, want = kind(redis.Consume(ctx, p.scope, p.redis, now)), kind(mem.Consume(ctx, p.scope, p.mem, now))
		case r < 91:
			op = fmt.Sprintf("HeldSeats(%s)", scope)
			s1, err1 := redis.HeldSeats(ctx, scope, now)
			s2, err2 := mem.HeldSeats(ctx, scope, now)
			slices.Sort(s1)
			slices.Sort(s2)
			got, want = fmt.Sprint(s1, kind(err1)), fmt.Sprint(s2, kind(err2))
		default:
			op = fmt.Sprintf("Stock(%s)", scope)
			n1, err1 := redis.Stock(ctx, scope, now)
			n2, err2 := mem.Stock(ctx, scope, now)
			got, want = fmt.Sprint(n1, kind(err1)), fmt.Sprint(n2, kind(err2))
		}
		if got != want {
			t.Fatalf("op %d at +%v: %s = %v, memhold says %v", i, now.Sub(t0), op, got, want)
		}
	}
	// The sequence must have taken every path.
	for _, k := range []string{"seats ok", "seats taken", "seats limit", "stock ok", "stock limit", "stock sold out", "get ok", "get not found"} {
		if kinds[k] < 10 {
			t.Errorf("%q happened %d times: the sequence does not exercise it (%v)", k, kinds[k], kinds)
		}
	}
}

// TestWithTimeoutOnHungRedis: hold.WithTimeout ends every call on a Redis
// that never answers (and whose client never times out) with
// ErrUnavailable, under no deadline of the caller's.
func TestWithTimeoutOnHungRedis(t *testing.T) {
	s := hold.WithTimeout(redishold.New(testenv.HungRedis(t), "usher:"), 100*time.Millisecond)
	ctx, now := context.Background(), time.Now()
	for name, call := range map[string]func() error{
		"HoldSeats": func() error {
			_, err := s.HoldSeats(ctx, "show", "alice", []string{"A-1"}, 4, time.Minute, now)
			return err
		},
		"Get":       func() error { _, err := s.Get(ctx, "show", "h", now); return err },
		"Release":   func() error { return s.Release(ctx, "show", "h", now) },
		"Find":      func() error { _, err := s.Find(ctx, "show", "A-1", now); return err },
		"HeldSeats": func() error { _, err := s.HeldSeats(ctx, "show", now); return err },
		"SetStock":  func() error { return s.SetStock(ctx, "show", 5) },
		"HoldStock": func() error { _, err := s.HoldStock(ctx, "show", "alice", 1, 4, time.Minute, now); return err },
		"Stock":     func() error { _, err := s.Stock(ctx, "show", now); return err },
		"Consume":   func() error { return s.Consume(ctx, "show", "h", now) },
	} {
		if err := call(); !errors.Is(err, hold.ErrUnavailable) {
			t.Errorf("%s on a hung Redis: err = %v, want ErrUnavailable", name, err)
		}
	}
}
