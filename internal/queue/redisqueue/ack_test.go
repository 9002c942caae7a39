package redisqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"usher/internal/queue"
	"usher/internal/queue/redisqueue"
	"usher/internal/testenv"
)

// TestAckNeedsReplica: a store that acknowledges only what a replica has
// (wait_replicas=1) refuses, as unavailable, an entry on a Redis without
// replicas (USHER_TEST_REDIS), though the entry is there; through the
// sentinels of USHER_TEST_REDIS_SENTINEL (one replica) it is acknowledged.
func TestAckNeedsReplica(t *testing.T) {
	ctx := context.Background()
	enter := func(url, visitor string) error {
		c, err := redisqueue.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		s := redisqueue.New(c, testenv.RedisPrefix(t, c))
		ack, err := redisqueue.ParseAck(url)
		if err != nil {
			t.Fatal(err)
		}
		s.SetAck(ack)
		set := queue.DefaultSettings()
		set.State = queue.Paused
		if _, err := s.PutRoom(ctx, "r", set, queue.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		_, _, err = s.Enter(ctx, "r", visitor, time.Now(), queue.EnterOptions{})
		if err == nil {
			// An existing place is acknowledged like a new one.
			_, _, err = s.Enter(ctx, "r", visitor, time.Now(), queue.EnterOptions{})
		}
		return err
	}
	single := testenv.URL(t, "USHER_TEST_REDIS")
	if err := enter(single+"?wait_replicas=1&wait_ms=20", "a"); !errors.Is(err, queue.ErrUnavailable) {
		t.Errorf("enter without a replica, wait_replicas=1: %v, want unavailable", err)
	}
	if err := enter(single, "b"); err != nil {
		t.Errorf("enter without a replica, by default: %v", err)
	}
	if err := enter(testenv.URL(t, "USHER_TEST_REDIS_SENTINEL")+"&wait_ms=2000", "c"); err != nil { // a loaded machine may lag 100 ms
		t.Errorf("enter through Sentinel, one replica, by default: %v", err)
	}
	for _, q := range []string{"wait_replicas=-1", "wait_replicas=x", "wait_ms=0"} {
		if _, err := redisqueue.Open(ctx, single+"?"+q); err == nil {
			t.Errorf("Open with %s: no error", q)
		}
	}
}
