package pow_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"usher/internal/limit/memlimit"
	"usher/internal/pow"
	"usher/internal/token"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newGuard(t testing.TB) (*pow.Guard, *clock) {
	clk := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	keys, err := token.LoadDir(filepath.Join(t.TempDir(), "keys"), clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	return pow.New(keys, memlimit.New(), clk.Now), clk
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	g, clk := newGuard(t)
	c := g.Issue("room-a", 8)
	nonce := pow.Solve(c)
	if !pow.Solves(c.Token, nonce, 8) {
		t.Fatal("Solve returned a nonce that does not solve")
	}
	sol := c.Token + ":" + nonce

	if err := g.Check(ctx, "room-a", 8, ""); !errors.Is(err, pow.ErrRequired) {
		t.Errorf("no solution: %v, want ErrRequired", err)
	}
	if err := g.Check(ctx, "room-b", 8, sol); !errors.Is(err, pow.ErrInvalid) {
		t.Errorf("other room: %v, want ErrInvalid", err)
	}
	if err := g.Check(ctx, "room-a", 9, sol); !errors.Is(err, pow.ErrInvalid) {
		t.Errorf("bits raised since: %v, want ErrInvalid", err)
	}
	wrong := "0"
	for pow.Solves(c.Token, wrong, 8) {
		wrong += "0"
	}
	for _, bad := range []string{c.Token + ":" + wrong, c.Token, ":" + nonce, c.Token + ":", c.Token + ": x", "c1.x.y.z:" + nonce, c.Token + "x:" + nonce} {
		if err := g.Check(ctx, "room-a", 8, bad); !errors.Is(err, pow.ErrInvalid) {
			t.Errorf("Check(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if err := g.Check(ctx, "room-a", 8, sol); err != nil {
		t.Fatalf("valid solution: %v", err)
	}
	if err := g.Check(ctx, "room-a", 8, sol); !errors.Is(err, pow.ErrInvalid) {
		t.Errorf("replay: %v, want ErrInvalid", err)
	}
	c2 := g.Issue("room-a", 4)
	sol2 := c2.Token + ":" + pow.Solve(c2)
	clk.Add(pow.TTL)
	if err := g.Check(ctx, "room-a", 4, sol2); !errors.Is(err, pow.ErrInvalid) {
		t.Errorf("expired: %v, want ErrInvalid", err)
	}
}

// TestSingleUseConcurrent: one solution sent by 64 clients at once is
// accepted exactly once.
func TestSingleUseConcurrent(t *testing.T) {
	g, _ := newGuard(t)
	c := g.Issue("room-a", 4)
	sol := c.Token + ":" + pow.Solve(c)
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if g.Check(context.Background(), "room-a", 4, sol) == nil {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 {
		t.Fatalf("one solution accepted %d times", ok.Load())
	}
}

// BenchmarkCheck is the server's cost of verifying one solution (memory
// single-use store).
func BenchmarkCheck(b *testing.B) {
	g, _ := newGuard(b)
	sols := make([]string, b.N)
	for i := range sols {
		c := g.Issue("room-a", 1)
		sols[i] = c.Token + ":" + pow.Solve(c)
	}
	b.ResetTimer()
	for i := range b.N {
		if err := g.Check(context.Background(), "room-a", 1, sols[i]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSolve16 is a native client's cost of solving at 16 bits.
func BenchmarkSolve16(b *testing.B) {
	g, _ := newGuard(b)
	for range b.N {
		pow.Solve(g.Issue("room-a", 16))
	}
}
