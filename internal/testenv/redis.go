package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/queue/redisqueue"
)

// Redis connects to the Redis at USHER_TEST_REDIS (skipping or failing as
// URL does; a set but silent server fails the test) and closes the client
// when the test ends.
func Redis(tb testing.TB) rueidis.Client {
	tb.Helper()
	return RedisAt(tb, "USHER_TEST_REDIS")
}

// RedisAt connects to the Redis whose URL is in the variable name as usher
// does (redisqueue.Open: no client-side cache; a Sentinel URL through its
// sentinels) and closes the client when the test ends.
func RedisAt(tb testing.TB, name string) rueidis.Client {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := redisqueue.Open(ctx, URL(tb, name))
	if err != nil {
		tb.Fatalf("%s is set but Redis does not answer: %v", name, err)
	}
	tb.Cleanup(c.Close)
	return c
}

// RedisPrefix returns a key prefix no other test uses; every key under it
// is deleted when the test ends.
func RedisPrefix(tb testing.TB, c rueidis.Client) string {
	tb.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	prefix := "usher-test:" + hex.EncodeToString(b) + ":"
	tb.Cleanup(func() { DeleteKeys(tb, c, prefix) })
	return prefix
}

// DeleteKeys removes every key under prefix on every node (each primary of
// a Redis Cluster; a replica's keys are its primary's, and UNLINK goes
// through c, which routes it to the key's primary).
func DeleteKeys(tb testing.TB, c rueidis.Client, prefix string) {
	tb.Helper()
	ctx := context.Background()
	for _, node := range c.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				tb.Errorf("scan %s*: %v", prefix, err)
				return
			}
			for _, k := range e.Elements {
				if err := c.Do(ctx, c.B().Unlink().Key(k).Build()).Error(); err != nil {
					tb.Errorf("unlink %s: %v", k, err)
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
}
