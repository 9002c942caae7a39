// Package limittest is the conformance suite that every limit.Store passes.
package limittest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"usher/internal/limit"
)

// Run runs the suite. newStore returns an empty store each call.
func Run(t *testing.T, newStore func(t *testing.T) limit.Store) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	perMinute := func(n int64) limit.Rate { return limit.Rate{Events: n, Per: time.Minute} }
	key := func() string { return fmt.Sprintf("ip:test-%d", rand.Uint64()) }

	allow := func(t *testing.T, s limit.Store, k string, r limit.Rate, now time.Time) (bool, time.Duration) {
		t.Helper()
		ok, retry, err := s.Allow(ctx, k, r, now)
		if err != nil {
			t.Fatalf("Allow(%s): %v", k, err)
		}
		return ok, retry
	}

	t.Run("Burst", func(t *testing.T) {
		t.Parallel()
		s, k, r := newStore(t), key(), perMinute(10)
		for i := range 10 {
			if ok, _ := allow(t, s, k, r, t0); !ok {
				t.Fatalf("event %d of a burst of 10 refused", i+1)
			}
		}
		ok, retry := allow(t, s, k, r, t0)
		if ok {
			t.Fatal("event 11 of a burst of 10 allowed")
		}
		if want := 6 * time.Second; retry != want {
			t.Fatalf("retry = %v, want %v", retry, want)
		}
	})

	t.Run("RefillAndNoTraceOfRefusals", func(t *testing.T) {
		t.Parallel()
		s, k, r := newStore(t), key(), perMinute(10)
		for range 10 {
			allow(t, s, k, r, t0)
		}
		for range 100 { // hammering while refused must not push the window out
			if ok, _ := allow(t, s, k, r, t0.Add(time.Second)); ok {
				t.Fatal("allowed over the limit")
			}
		}
		now := t0.Add(6 * time.Second)
		if ok, _ := allow(t, s, k, r, now); !ok {
			t.Fatal("one interval later: refused")
		}
		if ok, _ := allow(t, s, k, r, now); ok {
			t.Fatal("one interval later: two allowed")
		}
		if ok, _ := allow(t, s, k, r, t0.Add(2*time.Minute)); !ok {
			t.Fatal("after a quiet period: refused")
		}
	})

	t.Run("KeysIndependent", func(t *testing.T) {
		t.Parallel()
		s, r := newStore(t), perMinute(1)
		a, b := key(), key()
		if ok, _ := allow(t, s, a, r, t0); !ok {
			t.Fatal("a refused")
		}
		if ok, _ := allow(t, s, b, r, t0); !ok {
			t.Fatal("b refused after a")
		}
		if ok, _ := allow(t, s, a, r, t0); ok {
			t.Fatal("a allowed twice")
		}
	})

	t.Run("ConcurrentExact", func(t *testing.T) {
		t.Parallel()
		s, k, r := newStore(t), key(), perMinute(50)
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					ok, _, err := s.Allow(ctx, k, r, t0)
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						allowed.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if got := allowed.Load(); got != 50 {
			t.Fatalf("640 concurrent events at a limit of 50: %d allowed", got)
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		for _, tc := range []struct {
			key string
			r   limit.Rate
		}{
			{"", perMinute(1)},
			{string(make([]byte, limit.MaxKey+1)), perMinute(1)},
			{key(), limit.Rate{Events: 0, Per: time.Minute}},
			{key(), limit.Rate{Events: 1, Per: 0}},
			{key(), limit.Rate{Events: -1, Per: time.Minute}},
			{key(), limit.Rate{Events: 1, Per: 1000 * time.Hour}},
		} {
			if _, _, err := s.Allow(ctx, tc.key, tc.r, t0); !errors.Is(err, limit.ErrInvalid) {
				t.Errorf("Allow(%d-byte key, %+v) = %v, want ErrInvalid", len(tc.key), tc.r, err)
			}
		}
	})
}
