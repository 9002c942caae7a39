package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/queue/redisqueue"
)

// openStore is the one switch that picks the queue backend. The returned
// closer releases its connections.
func openStore(ctx context.Context, spec, prefix string) (queue.Store, io.Closer, error) {
	switch {
	case spec == "memory":
		return memqueue.New(), io.NopCloser(nil), nil
	case strings.HasPrefix(spec, "redis://"), strings.HasPrefix(spec, "rediss://"):
		c, err := redisqueue.Open(ctx, spec)
		if err != nil {
			return nil, nil, fmt.Errorf("store %s: %w", redactURL(spec), err)
		}
		return redisqueue.New(c, prefix), closerFunc(c.Close), nil
	default:
		return nil, nil, fmt.Errorf("bad setting --store/USHER_STORE=%q: want memory, redis://… or rediss://…", redactURL(spec))
	}
}

type closerFunc func()

func (f closerFunc) Close() error { f(); return nil }

// redactURL hides a password in a connection URL.
func redactURL(s string) string {
	if at := strings.LastIndex(s, "@"); at >= 0 {
		if scheme := strings.Index(s, "://"); scheme >= 0 && scheme < at {
			return s[:scheme+3] + "…" + s[at:]
		}
	}
	return s
}
