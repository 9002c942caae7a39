package queuetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"usher/internal/queue"
)

// The opening draw (queue/draw.go): a pre-queue before OpensAt, ordered by
// DrawKey at the opening, ahead of later entrants.

// drawSettings is a room opening at opens with batch 10 per step.
func drawSettings(opens time.Time) queue.Settings {
	set := settings(1000, 100) // batch 10 at the 100 ms interval
	set.OpensAt = opens
	set.PresenceTimeout = 30 * time.Second // it must not change the order
	return set
}

// admitAll runs admission steps from now on, one interval apart, until
// the room's queue is empty, and returns who was admitted, in order.
// Before each step the next 20 of want not yet admitted poll: they are
// present (drawn entrants are admitted only once a poll has seen them).
func admitAll(t *testing.T, s queue.Store, room string, now time.Time, want []string) []string {
	t.Helper()
	var order []string
	for i := 0; ; i++ {
		at := now.Add(time.Duration(i) * 100 * time.Millisecond)
		polled := 0
		for _, v := range want {
			if polled < 20 && !slices.Contains(order, v) {
				mustStatus(t, s, room, v, at)
				polled++
			}
		}
		res := mustAdmit(t, s, room, at)
		order = append(order, res.Admitted...)
		if st := mustStats(t, s, room, now); st.Waiting == 0 {
			return order
		}
		if i > 10000 {
			t.Fatalf("room %s: the queue does not drain", room)
		}
	}
}

func testDrawPreQueue(t *testing.T, s queue.Store) {
	opens := t0.Add(time.Hour)
	set := drawSettings(opens)
	paused := set
	paused.State, paused.OpensAt = queue.Paused, time.Time{}
	mustPut(t, s, "r", paused)
	early := mustEnter(t, s, "r", "early", t0) // waits before the room has an opening
	if early.Status != queue.Waiting || early.Seq != 1 {
		t.Fatalf("Enter before OpensAt was set = %+v, want waiting with seq 1", early)
	}
	mustPut(t, s, "r", set)
	st := mustStats(t, s, "r", t0)
	if len(st.Draw.Seed) != queue.SeedSize || st.Draw.Done {
		t.Fatalf("draw after OpensAt was set = %+v, want a %d-byte seed, not done", st.Draw, queue.SeedSize)
	}
	seed := st.Draw.Seed

	var pre []string
	for i := range 40 {
		v := fmt.Sprintf("p%d", i)
		e, created, err := s.Enter(context.Background(), "r", v, t0.Add(time.Duration(i)*time.Second), queue.EnterOptions{})
		if err != nil || !created || e.Status != queue.Waiting || e.Seq != 0 || e.Position != 0 {
			t.Fatalf("pre-queue Enter(%s) = %+v, %v, %v; want a new waiting entry without seq or position", v, e, created, err)
		}
		pre = append(pre, v)
	}
	if e, created, err := s.Enter(context.Background(), "r", "p3", t0.Add(time.Minute), queue.EnterOptions{}); err != nil || created || e.Seq != 0 {
		t.Errorf("second pre-queue Enter = %+v, %v, %v; want the same entry, not created", e, created, err)
	}
	if e := mustStatus(t, s, "r", "p5", t0.Add(time.Minute)); e.Status != queue.Waiting || e.Position != 0 {
		t.Errorf("pre-queue Status = %+v, want waiting at position 0", e)
	}
	if err := s.Leave(context.Background(), "r", "p7"); err != nil {
		t.Fatal(err)
	}
	pre = slices.DeleteFunc(pre, func(v string) bool { return v == "p7" })
	if res := mustAdmit(t, s, "r", opens.Add(-time.Millisecond)); len(res.Admitted) != 0 {
		t.Errorf("Admit before the opening admitted %v, want nobody", res.Admitted)
	}
	st = mustStats(t, s, "r", t0)
	if st.Waiting != 40 || st.Draw.Entrants != 39 || st.LastSeq != 1 || st.HeadSeq != 1 {
		t.Errorf("stats before the opening = waiting %d, entrants %d, last %d, head %d; want 40, 39, 1, 1",
			st.Waiting, st.Draw.Entrants, st.LastSeq, st.HeadSeq)
	}
	if !slices.Equal(mustStats(t, s, "r", t0).Draw.Seed, seed) {
		t.Error("the seed changed")
	}

	// Moving the opening keeps the seed.
	set.OpensAt = opens.Add(time.Minute)
	mustPut(t, s, "r", set)
	opens = set.OpensAt
	if !slices.Equal(mustStats(t, s, "r", t0).Draw.Seed, seed) {
		t.Error("the seed changed with OpensAt")
	}

	// The opening: a late entrant queues behind the drawn pre-queue.
	late := mustEnter(t, s, "r", "late", opens)
	if late.Status != queue.Waiting || late.Position != 41 {
		t.Errorf("Enter at the opening = %+v, want position 41 (behind early and 39 drawn)", late)
	}
	want := append([]string{"early"}, queue.DrawOrder(seed, pre)...)
	want = append(want, "late")
	st = mustStats(t, s, "r", opens)
	if !st.Draw.Done || st.Draw.Entrants != 39 || st.Waiting != 41 {
		t.Errorf("stats after the draw = %+v, want done with 39 entrants, 41 waiting", st)
	}
	// Positions are exact, and sequence numbers (kept in tickets for the
	// cheap status estimate) never place a visitor ahead of its true
	// position and never grow.
	checkDrawn := func(now time.Time, want []string, seqs map[string]int64) {
		t.Helper()
		st := mustStats(t, s, "r", now)
		for i, v := range want {
			e := mustStatus(t, s, "r", v, now)
			if e.Status != queue.Waiting || e.Position != int64(i+1) {
				t.Errorf("Status(%s) after the draw = %+v, want position %d", v, e, i+1)
			}
			if e.Seq < st.HeadSeq || e.Seq > st.LastSeq || e.Seq-st.HeadSeq+1 < e.Position {
				t.Errorf("Status(%s): seq %d with head %d and last %d estimates a place ahead of position %d",
					v, e.Seq, st.HeadSeq, st.LastSeq, e.Position)
			}
			if old, ok := seqs[v]; ok && e.Seq > old {
				t.Errorf("Status(%s): seq grew from %d to %d", v, old, e.Seq)
			}
			seqs[v] = e.Seq
		}
	}
	seqs := map[string]int64{}
	// The first step admits early, who polls, and none of the drawn
	// entrants: none has polled since the step marked them.
	mustStatus(t, s, "r", "early", opens)
	if res := mustAdmit(t, s, "r", opens); !slices.Equal(res.Admitted, want[:1]) || res.Skipped != 0 {
		t.Fatalf("first step after the draw = %+v, want [early]: the drawn entrants have not polled", res)
	}
	want = want[1:]
	checkDrawn(opens, want, seqs)
	// Once they polled, a step admits a batch or so; then the next in line
	// and one further back leave: positions stay exact, seqs never grow.
	step := mustAdmit(t, s, "r", opens.Add(100*time.Millisecond))
	if n := len(step.Admitted); n < 2 || n > 20 || !slices.Equal(step.Admitted, want[:n]) {
		t.Fatalf("first step after the draw admitted %v, want the first 10 or 11 of %v", step.Admitted, want)
	}
	want = want[len(step.Admitted):]
	for _, v := range []string{want[0], want[20]} {
		if err := s.Leave(context.Background(), "r", v); err != nil {
			t.Fatal(err)
		}
	}
	want = slices.Delete(slices.Delete(want, 20, 21), 0, 1)
	checkDrawn(opens, want, seqs)
	if got := admitAll(t, s, "r", opens.Add(time.Second), want); !slices.Equal(got, want) {
		t.Errorf("admission order = %v, want %v", got, want)
	}
	if st := mustStats(t, s, "r", opens); !st.Draw.Done || st.Draw.Entrants != 39 {
		t.Errorf("draw after admission = %+v, want done with 39 entrants", st.Draw)
	}
	// A room draws once: its opening cannot move now; other settings can.
	moved := set
	moved.OpensAt = opens.Add(time.Hour)
	if _, err := s.PutRoom(context.Background(), "r", moved, queue.PutOptions{}); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("PutRoom moving the opening after the draw: %v, want ErrInvalid", err)
	}
	set.MaxActive++
	mustPut(t, s, "r", set)
	if st := mustStats(t, s, "r", opens); !st.Settings.OpensAt.Equal(opens) || st.Settings.MaxActive != set.MaxActive {
		t.Errorf("settings after the refused move = %+v", st.Settings)
	}
}

// testDrawClearedOpening: clearing OpensAt before the opening draws at
// once; a room created with OpensAt has a seed; a room without has none.
func testDrawClearedOpening(t *testing.T, s queue.Store) {
	if created, err := s.PutRoom(context.Background(), "r", drawSettings(t0.Add(time.Hour)), queue.PutOptions{OnlyCreate: true}); err != nil || !created {
		t.Fatalf("CreateRoom = %v, %v", created, err)
	}
	for _, v := range []string{"a", "b", "c", "d"} {
		mustEnter(t, s, "r", v, t0)
	}
	seed := mustStats(t, s, "r", t0).Draw.Seed
	if len(seed) != queue.SeedSize {
		t.Fatalf("seed of a room created with OpensAt = %x", seed)
	}
	mustPut(t, s, "r", drawSettings(time.Time{}))
	if e := mustStatus(t, s, "r", "a", t0); e.Position == 0 {
		t.Errorf("Status after OpensAt was cleared = %+v, want a drawn position", e)
	}
	want := queue.DrawOrder(seed, []string{"a", "b", "c", "d"})
	if got := admitAll(t, s, "r", t0, want); !slices.Equal(got, want) {
		t.Errorf("admission order = %v, want %v", got, want)
	}
	mustPut(t, s, "plain", settings(10, 10))
	if d := mustStats(t, s, "plain", t0).Draw; d.Seed != nil || d.Done || d.Entrants != 0 {
		t.Errorf("draw of a room without OpensAt = %+v, want none", d)
	}
}

// testDrawConcurrentOpening enters visitors from many goroutines with
// clocks on both sides of the opening: whoever got a pre-queue entry is
// admitted first, in draw order, then everyone else in arrival order.
func testDrawConcurrentOpening(t *testing.T, s queue.Store) {
	opens := t0.Add(time.Minute)
	mustPut(t, s, "r", drawSettings(opens))
	seed := mustStats(t, s, "r", t0).Draw.Seed
	const workers, each = 16, 25
	var (
		mu        sync.Mutex
		pre       []string
		afterSeqs = map[string]int64{}
		wg        sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				v := fmt.Sprintf("w%d-%d", w, i)
				now := opens.Add(time.Duration(i-each/2) * time.Millisecond) // half before the opening
				e, _, err := s.Enter(context.Background(), "r", v, now, queue.EnterOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if e.Seq == 0 {
					pre = append(pre, v)
				} else {
					afterSeqs[v] = e.Seq
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(pre) == 0 || len(afterSeqs) == 0 {
		t.Fatalf("%d pre-queue and %d later entries: want both", len(pre), len(afterSeqs))
	}
	after := make([]string, 0, len(afterSeqs))
	for v := range afterSeqs {
		after = append(after, v)
	}
	slices.SortFunc(after, func(a, b string) int { return int(afterSeqs[a] - afterSeqs[b]) })
	want := append(queue.DrawOrder(seed, pre), after...)
	if got := admitAll(t, s, "r", opens, want); !slices.Equal(got, want) {
		t.Errorf("admission order = %v, want %v", got, want)
	}
}
