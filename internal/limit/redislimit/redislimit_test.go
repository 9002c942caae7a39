package redislimit

import (
	"context"
	"testing"
	"time"

	"usher/internal/limit"
	"usher/internal/limit/limittest"
	"usher/internal/testenv"
)

func TestConformance(t *testing.T) {
	c := testenv.Redis(t)
	limittest.Run(t, func(t *testing.T) limit.Store {
		return New(c, testenv.RedisPrefix(t, c))
	})
}

// TestConformanceCluster runs the suite on the Redis Cluster of
// USHER_TEST_REDIS_CLUSTER (scripts/cluster.sh).
func TestConformanceCluster(t *testing.T) {
	c := testenv.RedisAt(t, "USHER_TEST_REDIS_CLUSTER")
	limittest.Run(t, func(t *testing.T) limit.Store {
		return New(c, testenv.RedisPrefix(t, c))
	})
}

func TestKeyExpires(t *testing.T) {
	c := testenv.Redis(t)
	prefix := testenv.RedisPrefix(t, c)
	s := New(c, prefix)
	now := time.Now()
	ok, _, err := s.Allow(context.Background(), "ip:x", limit.Rate{Events: 1, Per: time.Minute}, now)
	if err != nil || !ok {
		t.Fatalf("Allow: %v, %v", ok, err)
	}
	ttl, err := c.Do(context.Background(), c.B().Pttl().Key(prefix+"limit:ip:x").Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if ttl <= 0 || ttl > time.Minute.Milliseconds() {
		t.Fatalf("PTTL = %d ms, want an expiry within a minute", ttl)
	}
}
