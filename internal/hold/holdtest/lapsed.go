package holdtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"usher/internal/hold"
)

// testLapsed: holds that expire are handed out by Lapsed once each, oldest
// expiry first, within max; released and consumed holds never are.
func testLapsed(t *testing.T, s hold.Store) {
	ctx := context.Background()
	const scope = "lapsed"
	if err := s.SetStock(ctx, scope, 10); err != nil {
		t.Fatal(err)
	}
	first := mustHoldSeats(t, s, scope, "ann", []string{"A1", "A2"}, 4, time.Minute, t0)
	stock, err := s.HoldStock(ctx, scope, "bob", 3, 4, 2*time.Minute, t0)
	if err != nil {
		t.Fatal(err)
	}
	released := mustHoldSeats(t, s, scope, "cid", []string{"B1"}, 4, time.Minute, t0)
	consumed := mustHoldSeats(t, s, scope, "dee", []string{"C1"}, 4, time.Minute, t0)
	if err := s.Release(ctx, scope, released.ID, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.Consume(ctx, scope, consumed.ID, t0); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Lapsed(ctx, scope, t0.Add(30*time.Second), 10); err != nil || len(got) != 0 {
		t.Fatalf("Lapsed before any expiry = %v, %v; want none", got, err)
	}
	got, err := s.Lapsed(ctx, scope, t0.Add(3*time.Minute), 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]hold.Hold{first}, got); diff != "" {
		t.Errorf("Lapsed(max 1) (-want +got):\n%s", diff)
	}
	got, err = s.Lapsed(ctx, scope, t0.Add(3*time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]hold.Hold{stock}, got); diff != "" {
		t.Errorf("Lapsed after the first (-want +got):\n%s", diff)
	}
	if got, err := s.Lapsed(ctx, scope, t0.Add(4*time.Minute), 10); err != nil || len(got) != 0 {
		t.Errorf("Lapsed again = %v, %v; want none (each lapsed hold once)", got, err)
	}
	if got, err := s.Lapsed(ctx, "no-such-scope", t0, 10); err != nil || len(got) != 0 {
		t.Errorf("Lapsed of an unknown scope = %v, %v; want none", got, err)
	}
}

// testConcurrentLapsed: callers racing for one scope's lapsed holds get
// each exactly once between them.
func testConcurrentLapsed(t *testing.T, s hold.Store) {
	ctx := context.Background()
	const scope, holds, callers = "lapsed-race", 60, 8
	want := make([]string, holds)
	for i := range holds {
		want[i] = mustHoldSeats(t, s, scope, fmt.Sprintf("h%d", i), []string{fmt.Sprintf("S%d", i)}, 4, time.Duration(i+1)*time.Second, t0).ID
	}
	later := t0.Add(time.Hour)
	var mu sync.Mutex
	var got []string
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for {
				hs, err := s.Lapsed(ctx, scope, later, 7)
				if err != nil {
					t.Error(err)
					return
				}
				if len(hs) == 0 {
					return
				}
				mu.Lock()
				for _, h := range hs {
					got = append(got, h.ID)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lapsed holds handed out (-want +got):\n%s", diff)
	}
}
