package token_test

import (
	"sync"
	"testing"
	"time"

	"usher/internal/token"
)

func TestReusePass(t *testing.T) {
	clk := newClock(t0)
	k, _ := newRing(t, clk)
	ttl := 10 * time.Minute
	p := token.Pass{Room: "sale", Visitor: "v1", ExpiresAt: t0.Add(ttl)}
	first, exp, err := k.ReusePass(p)
	if err != nil || !exp.Equal(p.ExpiresAt) {
		t.Fatalf("ReusePass = %v, %v; want a pass to %v", exp, err, p.ExpiresAt)
	}
	if got, err := k.ParsePass(first, "sale"); err != nil || got.Room != p.Room || got.Visitor != p.Visitor || !got.ExpiresAt.Equal(p.ExpiresAt) {
		t.Fatalf("the pass parses as %+v, %v; want %+v", got, err, p)
	}
	// A poll 4 minutes on: the slot slid to 14 min, the pass has 6 of its
	// 10 minutes left: the same pass.
	clk.Set(t0.Add(4 * time.Minute))
	p.ExpiresAt = clk.Now().Add(ttl)
	if again, exp, _ := k.ReusePass(p); again != first || !exp.Equal(t0.Add(ttl)) {
		t.Errorf("4 min on: a new pass (expiring %v), want the first one again", exp)
	}
	// Another visitor, another room: their own passes.
	if other, _, _ := k.ReusePass(token.Pass{Room: "sale", Visitor: "v2", ExpiresAt: p.ExpiresAt}); other == first {
		t.Error("another visitor got the first visitor's pass")
	}
	if other, _, _ := k.ReusePass(token.Pass{Room: "other", Visitor: "v1", ExpiresAt: p.ExpiresAt}); other == first {
		t.Error("another room got the first room's pass")
	}
	// 6 minutes on the pass has 4 of 10 left: a new one, kept in turn.
	clk.Set(t0.Add(6 * time.Minute))
	p.ExpiresAt = clk.Now().Add(ttl)
	renewed, exp, _ := k.ReusePass(p)
	if renewed == first || !exp.Equal(p.ExpiresAt) {
		t.Errorf("past half its life: the old pass again (expiring %v), want a new one to %v", exp, p.ExpiresAt)
	}
	if again, _, _ := k.ReusePass(p); again != renewed {
		t.Error("the renewed pass was not kept")
	}
	// A slot that ends sooner than the kept pass (the TTL was cut): a new
	// pass, never one that outlives the slot.
	p.ExpiresAt = clk.Now().Add(time.Minute)
	if short, exp, _ := k.ReusePass(p); short == renewed || !exp.Equal(p.ExpiresAt) {
		t.Errorf("a shorter slot got a pass to %v, want a new one to %v", exp, p.ExpiresAt)
	}
}

func TestReusePassConcurrent(t *testing.T) {
	k, _ := newRing(t, newClock(t0))
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 200 {
				p := token.Pass{Room: "sale", Visitor: string(rune('a' + (g+i)%8)), ExpiresAt: t0.Add(time.Hour)}
				s, _, err := k.ReusePass(p)
				if err != nil {
					t.Error(err)
					return
				}
				if got, err := k.ParsePass(s, "sale"); err != nil || got.Visitor != p.Visitor {
					t.Errorf("pass for %s parses as %+v, %v", p.Visitor, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestCheckPass: a verified pass is trusted for its room until it expires,
// for at most a minute; another room, or a pass past its expiry, is not.
func TestCheckPass(t *testing.T) {
	clk := newClock(t0)
	k, _ := newRing(t, clk)
	raw, err := k.SignPass(token.Pass{Room: "sale", Visitor: "v1", ExpiresAt: t0.Add(90 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.CheckPass(raw, "sale"); err != nil {
		t.Fatalf("CheckPass = %v, want nil", err)
	}
	if err := k.CheckPass(raw, "other"); err == nil {
		t.Error("CheckPass for another room = nil, want an error")
	}
	if err := k.CheckPass(raw[:len(raw)-2]+"xx", "sale"); err == nil {
		t.Error("CheckPass of a forged pass = nil, want an error")
	}
	clk.Set(t0.Add(59 * time.Second))
	if err := k.CheckPass(raw, "sale"); err != nil {
		t.Errorf("59 s on: CheckPass = %v, want nil", err)
	}
	clk.Set(t0.Add(90 * time.Second))
	if err := k.CheckPass(raw, "sale"); err == nil {
		t.Error("at its expiry: CheckPass = nil, want an error")
	}
}
