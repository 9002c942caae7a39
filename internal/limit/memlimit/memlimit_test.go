package memlimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"usher/internal/limit"
	"usher/internal/limit/limittest"
)

func TestConformance(t *testing.T) {
	limittest.Run(t, func(*testing.T) limit.Store { return New() })
}

// TestForgetsQuietKeys pins the memory bound: keys of clients quiet for a
// period are dropped as the store grows.
func TestForgetsQuietKeys(t *testing.T) {
	s := New()
	r := limit.Rate{Events: 5, Per: time.Minute}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range 100_000 {
		now := t0.Add(time.Duration(i) * time.Millisecond) // 100 s of clients, one each
		if ok, _, err := s.Allow(context.Background(), fmt.Sprint("ip:", i), r, now); err != nil || !ok {
			t.Fatalf("client %d: %v, %v", i, ok, err)
		}
	}
	// A client costs 12 s (one event of 5 per minute); at most ~12 s of
	// clients (12,000) are live, and a shard sweeps at twice its size.
	if n := s.Len(); n > 2*12_000+shards*1024 {
		t.Fatalf("%d keys remembered, want about 12,000 live ones", n)
	}
}
