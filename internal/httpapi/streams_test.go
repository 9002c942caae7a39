package httpapi

import (
	"errors"
	"sync"
	"testing"
)

// TestStreamsBounded: many goroutines racing for streams never exceed
// either bound, and released streams are counted back.
func TestStreamsBounded(t *testing.T) {
	s := newStreams(2, 10)
	var mu sync.Mutex
	var held []func()
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := s.acquire(string(rune('a' + i%8)))
			if err != nil {
				if !errors.Is(err, ErrTooManyStreams) {
					t.Error(err)
				}
				return
			}
			mu.Lock()
			held = append(held, release)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(held) != 10 {
		t.Fatalf("%d streams held, want the total bound 10", len(held))
	}
	for v, n := range s.byVisitor {
		if n > 2 {
			t.Errorf("visitor %q holds %d streams, want at most 2", v, n)
		}
	}
	for _, release := range held {
		release()
		release() // twice is harmless
	}
	if s.total != 0 || len(s.byVisitor) != 0 {
		t.Fatalf("after release: total %d, visitors %d", s.total, len(s.byVisitor))
	}
	if _, err := s.acquire("a"); err != nil {
		t.Fatalf("after release: %v", err)
	}
}
