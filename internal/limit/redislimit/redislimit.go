// Package redislimit is the limit.Store on Redis, so that a limit holds
// across every usher instance that shares the server.
//
// A key is one string, <prefix>limit:<key>, holding its theoretical arrival
// time in unix microseconds, with a PX expiry at that time: a quiet client's
// key vanishes by itself. Allow is one Lua script (lua/allow.lua), atomic
// however many instances call it. Times are the caller's clock at
// microsecond resolution. A call that fails with limit.ErrUnavailable may
// still have run. On Redis Cluster the script's one key is its slot; while
// that slot migrates, the node that has the key runs it (the source, or the
// target after ASK), so it needs no guard key like the queue's.
package redislimit

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/limit"
)

var _ limit.Store = (*Store)(nil)

//go:embed lua/allow.lua
var allowLua string

// Store is a limit.Store on Redis.
type Store struct {
	c      rueidis.Client
	prefix string
	allow  *rueidis.Lua
}

// New returns a store that keeps its keys under prefix+"limit:" with c.
func New(c rueidis.Client, prefix string) *Store {
	return &Store{c: c, prefix: prefix + "limit:", allow: rueidis.NewLuaScript(allowLua)}
}

// Allow implements limit.Store.
func (s *Store) Allow(ctx context.Context, key string, r limit.Rate, now time.Time) (bool, time.Duration, error) {
	if err := limit.Check(key, r); err != nil {
		return false, 0, err
	}
	interval := max(1, r.Interval().Microseconds())
	arr, err := s.allow.Exec(ctx, s.c, []string{s.prefix + key}, []string{
		strconv.FormatInt(now.UnixMicro(), 10),
		strconv.FormatInt(interval, 10),
		strconv.FormatInt(r.Events, 10),
	}).AsIntSlice()
	if err != nil || len(arr) != 2 {
		return false, 0, fmt.Errorf("%w: %v", limit.ErrUnavailable, err)
	}
	return arr[0] == 1, time.Duration(arr[1]) * time.Microsecond, nil
}
