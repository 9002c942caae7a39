package main

import (
	"context"
	"testing"
	"time"

	"usher/internal/hold/redishold"
	"usher/internal/limit/redislimit"
	"usher/internal/queue/memqueue"
	"usher/internal/testenv"
)

// TestStoresChosenOneByOne: the queue, hold and limit stores each follow
// their own setting, and settings naming the same Redis share one client.
func TestStoresChosenOneByOne(t *testing.T) {
	url := testenv.URL(t, "USHER_TEST_REDIS")
	prefix := testenv.RedisPrefix(t, testenv.Redis(t))
	ctx := context.Background()
	var cl closers
	t.Cleanup(func() { cl.Close() })
	fast := fastStores{prefix: prefix, cl: &cl}
	qs, err := fast.queue(ctx, "queue-store", "memory", "")
	if err != nil {
		t.Fatal(err)
	}
	hs, err := fast.hold(ctx, "hold-store", url)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := fast.limit(ctx, "limit-store", url)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := qs.(*memqueue.Store); !ok {
		t.Errorf("queue store %T, want memqueue", qs)
	}
	if _, ok := hs.(*redishold.Store); !ok {
		t.Errorf("hold store %T, want redishold", hs)
	}
	if _, ok := ls.(*redislimit.Store); !ok {
		t.Errorf("limit store %T, want redislimit", ls)
	}
	if len(fast.redis) != 1 {
		t.Errorf("%d Redis clients for one URL, want 1", len(fast.redis))
	}
	// The hold is in Redis: a second hold store on another client sees it.
	h, err := hs.HoldSeats(ctx, "s1", "v1", []string{"A1"}, 4, time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	other := redishold.New(testenv.Redis(t), prefix+"hold:")
	if _, err := other.Get(ctx, "s1", h.ID, time.Now()); err != nil {
		t.Errorf("the hold is not in Redis: %v", err)
	}
	if _, err := fast.queue(ctx, "queue-store", "mem", ""); err == nil {
		t.Error("queue store mem: no error")
	}
}
