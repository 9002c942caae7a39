package queuetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"usher/internal/queue"
)

// Queueing methods (queue/method.go): fifo, random, passthrough, reject,
// and what a switch does to those already waiting.

// methodSettings is a paused room admitting 1 a second (near zone 50),
// without presence, taking newcomers by method q.
func methodSettings(q queue.Queueing) queue.Settings {
	set := settings(1000, 1)
	set.State, set.PresenceTimeout, set.Queueing = queue.Paused, 0, q
	return set
}

// positions polls each of visitors at now and returns their positions.
func positions(t *testing.T, s queue.Store, room string, visitors []string, now time.Time) map[string]int64 {
	t.Helper()
	pos := make(map[string]int64, len(visitors))
	for _, v := range visitors {
		e := mustStatus(t, s, room, v, now)
		if e.Status != queue.Waiting {
			t.Fatalf("Status(%s) = %+v, want waiting", v, e)
		}
		pos[v] = e.Position
	}
	return pos
}

func enterAll(t *testing.T, s queue.Store, room, prefix string, n int, at time.Time) []string {
	t.Helper()
	var vs []string
	for i := range n {
		v := fmt.Sprintf("%s%d", prefix, i)
		mustEnter(t, s, room, v, at.Add(time.Duration(i)*time.Millisecond))
		vs = append(vs, v)
	}
	return vs
}

// testQueueingRandom: a window's entrants behind the near zone are drawn
// among themselves (uniformly: the early half of them do not come out
// ahead), and a later window's queue behind them without moving them.
func testQueueingRandom(t *testing.T, s queue.Store) {
	set := methodSettings(queue.QueueRandom)
	mustPut(t, s, "r", set)
	first := enterAll(t, s, "r", "v", 250, t0) // t0 starts a minute
	st := mustStats(t, s, "r", t0.Add(time.Second))
	if i, _ := queue.DrawWindow(t0, time.Minute); st.Window != (queue.DrawnWindow{Index: i, Seq: 1}) {
		t.Errorf("Stats.Window = %+v, want index %d from seq 1", st.Window, i)
	}
	pos := positions(t, s, "r", first, t0.Add(time.Second))
	seen := make(map[int64]bool)
	moved := 0
	var early, late float64
	for i, v := range first {
		p := pos[v]
		if p < 1 || p > 250 || seen[p] {
			t.Fatalf("%s at position %d: want each of 1 to 250 once", v, p)
		}
		seen[p] = true
		switch {
		case i < 50 && p != int64(i+1):
			t.Errorf("%s (in the near zone at entry) at position %d, want %d: nobody there moves", v, p, i+1)
		case i >= 50 && i < 150:
			early += float64(p) / 100
		case i >= 150:
			late += float64(p) / 100
		}
		if p != int64(i+1) {
			moved++
		}
	}
	// Drawn uniformly, both halves average 150.5 (σ of the difference
	// about 8); in arrival order they would be 100 apart.
	if moved == 0 || early-late > 40 || late-early > 40 {
		t.Errorf("%d of 200 drawn moved; mean position of the first 100 %.1f, of the last 100 %.1f: want a uniform draw", moved, early, late)
	}
	next := enterAll(t, s, "r", "w", 50, t0.Add(time.Minute))
	for v, p := range positions(t, s, "r", next, t0.Add(time.Minute+time.Second)) {
		if p <= 250 {
			t.Errorf("%s of the next window at position %d, want behind the first window's 250", v, p)
		}
	}
	for v, p := range positions(t, s, "r", first, t0.Add(time.Minute+time.Second)) {
		if p != pos[v] {
			t.Errorf("%s of a closed window moved from %d to %d", v, pos[v], p)
		}
	}
}

// testQueueingSwitch: those waiting when a room turns random keep their
// places; when it turns fifo again, newcomers queue at the end.
func testQueueingSwitch(t *testing.T, s queue.Store) {
	set := methodSettings(queue.QueueFIFO)
	mustPut(t, s, "r", set)
	before := enterAll(t, s, "r", "a", 60, t0)
	set.Queueing = queue.QueueRandom
	mustPut(t, s, "r", set)
	enterAll(t, s, "r", "b", 100, t0.Add(time.Second))
	for i, v := range before {
		if e := mustStatus(t, s, "r", v, t0.Add(2*time.Second)); e.Position != int64(i+1) || e.Seq != int64(i+1) {
			t.Errorf("%s, waiting before the switch to random: %+v, want seq and position %d", v, e, i+1)
		}
	}
	set.Queueing = queue.QueueFIFO
	mustPut(t, s, "r", set)
	if e := mustEnter(t, s, "r", "c", t0.Add(3*time.Second)); e.Seq != 161 || e.Position != 161 {
		t.Errorf("Enter after the switch back to fifo = %+v, want seq and position 161", e)
	}
}

// testQueueingPassthrough: a passthrough room admits the whole line at the
// next step and newcomers at once, past max_active; back to fifo, the cap
// holds again.
func testQueueingPassthrough(t *testing.T, s queue.Store) {
	set := methodSettings(queue.QueueFIFO)
	set.MaxActive = 2
	mustPut(t, s, "r", set)
	waiting := enterAll(t, s, "r", "a", 5, t0)
	mustAdmit(t, s, "r", t0.Add(500*time.Millisecond)) // steps run while paused too
	set.State, set.Queueing = queue.Open, queue.QueuePassthrough
	mustPut(t, s, "r", set)
	if res := mustAdmit(t, s, "r", t0.Add(time.Second)); len(res.Admitted) != len(waiting) {
		t.Fatalf("step of a passthrough room admitted %v, want the whole line %v", res.Admitted, waiting)
	}
	if e := mustEnter(t, s, "r", "b", t0.Add(2*time.Second)); e.Status != queue.Active {
		t.Errorf("Enter in a passthrough room = %+v, want active at once", e)
	}
	if st := mustStats(t, s, "r", t0.Add(2*time.Second)); st.Active != 6 || st.Waiting != 0 {
		t.Errorf("Stats = %d active, %d waiting; want 6 active (past max_active 2: counted), none waiting", st.Active, st.Waiting)
	}
	set.Queueing = queue.QueueFIFO
	mustPut(t, s, "r", set)
	if e := mustEnter(t, s, "r", "c", t0.Add(3*time.Second)); e.Status != queue.Waiting {
		t.Errorf("Enter after the switch back to fifo, 6 active of 2 = %+v, want waiting", e)
	}
}

// testQueueingReject: a reject room refuses newcomers (closed) but keeps
// and admits those already waiting; back to fifo, newcomers enter.
func testQueueingReject(t *testing.T, s queue.Store) {
	set := methodSettings(queue.QueueFIFO)
	mustPut(t, s, "r", set)
	mustEnter(t, s, "r", "a", t0)
	set.State, set.Queueing = queue.Open, queue.QueueReject
	mustPut(t, s, "r", set)
	if _, _, err := s.Enter(context.Background(), "r", "b", t0.Add(time.Second), queue.EnterOptions{}); !errors.Is(err, queue.ErrRoomClosed) {
		t.Errorf("Enter of a newcomer in a reject room: %v, want ErrRoomClosed", err)
	}
	if e := mustEnter(t, s, "r", "a", t0.Add(time.Second)); e.Status != queue.Waiting || e.Position != 1 {
		t.Errorf("Enter of one waiting in a reject room = %+v, want its place", e)
	}
	if res := mustAdmit(t, s, "r", t0.Add(2*time.Second)); len(res.Admitted) != 1 || res.Admitted[0] != "a" {
		t.Errorf("step of a reject room admitted %v, want [a]", res.Admitted)
	}
	set.Queueing = queue.QueueFIFO
	mustPut(t, s, "r", set)
	if _, _, err := s.Enter(context.Background(), "r", "b", t0.Add(3*time.Second), queue.EnterOptions{}); err != nil {
		t.Errorf("Enter after the switch back to fifo: %v", err)
	}
}
