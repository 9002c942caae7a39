package simorigin

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"usher/internal/testenv"
)

func TestParsePhases(t *testing.T) {
	got, err := ParsePhases("30s:conns=10,1m:conns=5:service=lognormal:80ms:0.25:timeout=2s,10s:workers=50:timeout=0")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"30s:conns=10", "1m0s:conns=5:service=lognormal:80ms:0.25:timeout=2s", "10s:workers=50:timeout=0s"}
	if len(got) != len(want) {
		t.Fatalf("got %d phases, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("phase %d = %s, want %s", i+1, got[i], want[i])
		}
	}
	if got[2].Timeout >= 0 {
		t.Errorf("timeout=0 in a phase: %v, want negative (none)", got[2].Timeout)
	}
	for _, bad := range []string{"conns=5", "30s:conns=0", "30s:pool=3", "30s:service=weird:1", "-1s:conns=2", "30s:timeout=-1s"} {
		if _, err := ParsePhases(bad); err == nil {
			t.Errorf("ParsePhases(%q) = nil error, want one", bad)
		}
	}
}

// TestPoolResize: a pool that grows lets its first waiters in at once; one
// that shrinks lets nobody new in until enough holders left.
func TestPoolResize(t *testing.T) {
	var waiting atomic.Int64
	p := newPool(1, &waiting)
	ctx := context.Background()
	if waited, err := p.acquire(ctx, nil); waited || err != nil {
		t.Fatalf("first acquire: waited %v, err %v", waited, err)
	}
	got := make(chan bool, 2)
	for range 2 {
		go func() { waited, err := p.acquire(ctx, nil); got <- waited && err == nil }()
	}
	testenv.Eventually(t, time.Minute, "two waiters", func() bool { return waiting.Load() == 2 })
	p.resize(3)
	for range 2 {
		if !<-got {
			t.Fatal("a waiter was not granted after the pool grew")
		}
	}
	p.resize(1) // 3 held, size 1: the next waits until two left and one more
	cancelled, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := p.acquire(cancelled, nil); done <- err }()
	testenv.Eventually(t, time.Minute, "one waiter", func() bool { return waiting.Load() == 1 })
	p.release()
	p.release()
	select {
	case <-done:
		t.Fatal("a waiter got in while the pool was full at its new size")
	default:
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("cancelled waiter got a slot")
	}
	p.release()
	if waited, err := p.acquire(ctx, nil); waited || err != nil {
		t.Fatalf("acquire from an empty pool: waited %v, err %v", waited, err)
	}
}

// TestPhasesRun: the phases start with the first pool-bound request and
// change the pool; utilisation counts the pool's size over time.
func TestPhasesRun(t *testing.T) {
	phases, err := ParsePhases("50ms:conns=1,50ms:conns=3")
	if err != nil {
		t.Fatal(err)
	}
	o := New(Config{Conns: 10, Service: Constant(time.Millisecond), Phases: phases})
	if st := o.Stats(); st.Phase != 0 || st.Conns != 10 {
		t.Fatalf("before any request: phase %d conns %d, want 0 and 10", st.Phase, st.Conns)
	}
	o.Handler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/seats", nil))
	if st := o.Stats(); st.Phase < 1 || st.Phases != "50ms:conns=1,50ms:conns=3" {
		t.Fatalf("after a request: phase %d (%s), want 1 or later", st.Phase, st.Phases)
	}
	testenv.Eventually(t, time.Minute, "phase 2 with 3 connections", func() bool { st := o.Stats(); return st.Phase == 2 && st.Conns == 3 })
	st := o.Stats()
	if st.ConnCapacitySeconds >= 10*st.UptimeSeconds || st.ConnCapacitySeconds <= 0 {
		t.Errorf("capacity %v conn·s over %v s, want less than 10 connections' worth", st.ConnCapacitySeconds, st.UptimeSeconds)
	}
}
