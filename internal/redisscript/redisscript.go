// Package redisscript runs usher's Lua scripts on Redis, alone or in a
// Redis Cluster, for the stores that keep their state there (redisqueue,
// redisshard, redishold), holds the Lua they share (refill.lua), and reads
// a cluster's slot map (SlotOwners).
package redisscript

import (
	"context"
	_ "embed"
	"time"

	"github.com/redis/rueidis"
)

// RefillLua defines refill, the token bucket's refill, for the stores'
// scripts that keep one (prepended to them).
//
//go:embed refill.lua
var RefillLua string

// TryAgainFor bounds the retries of a script that Redis Cluster refused
// with TRYAGAIN when the caller's context has no deadline of its own.
const TryAgainFor = time.Second

// Exec runs script, and again while Redis Cluster refuses it with TRYAGAIN:
// during a slot migration (docs/operations.md#redis-high-availability) a script whose
// keys are split between the two nodes, or not all on the target yet, is
// refused before it runs, so running it again is safe. The retries back off
// from 1 ms to 16 ms and stop at the context's end (the store deadline) or
// after TryAgainFor; the last TRYAGAIN is then the answer (unavailable).
// rueidis follows MOVED and ASK itself, but retries TRYAGAIN only for
// scripts marked retryable, which it would also resend after a broken
// connection, when a script may have run: usher's scripts are not
// idempotent.
func Exec(ctx context.Context, c rueidis.Client, script *rueidis.Lua, keys, args []string) rueidis.RedisResult {
	wait, give := time.Millisecond, time.Now().Add(TryAgainFor)
	for {
		r := script.Exec(ctx, c, keys, args)
		if e, ok := rueidis.IsRedisErr(r.Error()); !ok || !e.IsTryAgain() || time.Now().After(give) {
			return r
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return r
		case <-t.C:
		}
		wait = min(2*wait, 16*time.Millisecond)
	}
}
