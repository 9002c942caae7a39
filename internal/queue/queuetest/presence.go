package queuetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"usher/internal/queue"
)

// testMaxWaiting: an entry that would make the line longer than
// MaxWaiting is refused and creates nothing; passthrough and existing
// entries are not entries that lengthen it.
func testMaxWaiting(t *testing.T, s queue.Store) {
	ctx := context.Background()
	set := settings(1, 10)
	set.MaxWaiting = 3
	mustPut(t, s, "r", set)
	if e := mustEnter(t, s, "r", "a", t0); e.Status != queue.Active {
		t.Fatalf("first Enter into an empty capped room = %+v, want passthrough", e)
	}
	for _, v := range []string{"b", "c", "d"} {
		mustEnter(t, s, "r", v, t0)
	}
	if _, _, err := s.Enter(ctx, "r", "e", t0, queue.EnterOptions{}); !errors.Is(err, queue.ErrQueueFull) {
		t.Fatalf("Enter into a full line: %v, want ErrQueueFull", err)
	}
	if e, created, err := s.Enter(ctx, "r", "d", t0, queue.EnterOptions{}); err != nil || created || e.Position != 3 {
		t.Errorf("re-Enter of a waiting visitor into a full line = %+v, %v, %v; want its place", e, created, err)
	}
	if st := mustStats(t, s, "r", t0); st.Waiting != 3 || st.LastSeq != 4 {
		t.Errorf("stats after a refused entry = waiting %d, last seq %d; want 3, 4 (nothing created)", st.Waiting, st.LastSeq)
	}
	if e := mustStatus(t, s, "r", "e", t0); e.Status != queue.Gone {
		t.Errorf("the refused visitor's status = %+v, want gone", e)
	}
	if err := s.Leave(ctx, "r", "b"); err != nil {
		t.Fatal(err)
	}
	if e := mustEnter(t, s, "r", "e", t0); e.Status != queue.Waiting || e.Position != 3 {
		t.Errorf("Enter after a place freed = %+v, want waiting at 3", e)
	}

	pre := drawSettings(t0.Add(time.Hour))
	pre.MaxWaiting = 2
	mustPut(t, s, "pre", pre)
	mustEnter(t, s, "pre", "p1", t0)
	mustEnter(t, s, "pre", "p2", t0)
	if _, _, err := s.Enter(ctx, "pre", "p3", t0, queue.EnterOptions{}); !errors.Is(err, queue.ErrQueueFull) {
		t.Errorf("Enter into a full pre-queue: %v, want ErrQueueFull", err)
	}
	if st := mustStats(t, s, "pre", t0); st.Waiting != 2 || st.Draw.Entrants != 2 {
		t.Errorf("pre-queue stats after a refused entry = %+v, want 2 waiting, 2 entrants", st)
	}
}

// testPresence: near the front, a waiting visitor not seen for
// PresenceTimeout is parked: taken out of the line without spending a token
// or a slot; when it polls again it is next in line and the next step
// admits it first; absent for ActiveTTL more, it is removed. Present
// visitors are admitted in order, and those behind the parked see the
// positions admission will give them.
func testPresence(t *testing.T, s queue.Store) {
	set := settings(100, 10) // batch 1 per 100 ms step, bucket of 2
	set.PresenceTimeout = 30 * time.Second
	set.ActiveTTL = time.Minute
	vs := fill(t, s, "r", set, 7)
	if got := mustAdmit(t, s, "r", t0).Admitted; !slices.Equal(got, vs[:1]) {
		t.Fatalf("first step admitted %v, want [v1]", got)
	}
	// Only v3, v5 and v7 poll in the next 31 s.
	back := t0.Add(31 * time.Second)
	for _, v := range []string{"v3", "v5", "v7"} {
		mustStatus(t, s, "r", v, back)
	}
	res := mustAdmit(t, s, "r", back)
	if !slices.Equal(res.Admitted, []string{"v3", "v5"}) || res.Skipped != 2 || res.Abandoned != 0 {
		t.Fatalf("step with v2 and v4 absent = %+v, want [v3 v5] with 2 skipped", res)
	}
	// v6 was not reached: still in line, now first; v7 second.
	if e := mustStatus(t, s, "r", "v7", back); e.Status != queue.Waiting || e.Position != 2 {
		t.Errorf("v7 behind the parked = %+v, want position 2", e)
	}
	if st := mustStats(t, s, "r", back); st.Waiting != 2 || st.HeadSeq != 6 {
		t.Errorf("stats with v2 and v4 parked = waiting %d, head %d; want 2, 6", st.Waiting, st.HeadSeq)
	}
	// v2 comes back: next in line, admitted first.
	if e := mustStatus(t, s, "r", "v2", back.Add(time.Second)); e.Status != queue.Waiting || e.Position != 1 {
		t.Fatalf("v2 back = %+v, want position 1", e)
	}
	mustStatus(t, s, "r", "v7", back.Add(time.Second))
	res = mustAdmit(t, s, "r", back.Add(time.Second))
	if !slices.Equal(res.Admitted, []string{"v2", "v7"}) || res.Skipped != 1 {
		t.Fatalf("step after v2 came back = %+v, want [v2 v7] with v6 parked", res)
	}
	// v1 never claimed its slot; v3, v5, v2 and v7 hold one; the absent none.
	if st := mustStats(t, s, "r", back.Add(time.Second)); st.Active != 4 || st.Waiting != 0 || st.AdmittedTotal != 5 {
		t.Errorf("stats = %+v, want 4 active (no slot for the absent), none waiting", st)
	}
	// A parked visitor may leave; one absent past the grace is removed.
	if err := s.Leave(context.Background(), "r", "v4"); err != nil {
		t.Fatal(err)
	}
	late := t0.Add(set.PresenceTimeout + set.ActiveTTL)
	res = mustAdmit(t, s, "r", late)
	if len(res.Admitted) != 0 || res.Abandoned != 1 {
		t.Fatalf("step after the grace = %+v, want v6 removed", res)
	}
	for _, v := range []string{"v4", "v6"} {
		if e := mustStatus(t, s, "r", v, late); e.Status != queue.Gone {
			t.Errorf("%s after leaving or the grace = %+v, want gone", v, e)
		}
	}
}

// testPresenceFarBack: presence is measured from when a visitor came near
// the front (Settings.Near), not from its entry: visitors who waited an
// hour without polling the store are not passed over when they come near
// and poll.
func testPresenceFarBack(t *testing.T, s queue.Store) {
	set := settings(1000, 10) // batch 1; watched: 400
	set.PresenceTimeout = 30 * time.Second
	vs := fill(t, s, "r", set, 120)
	now := t0.Add(time.Hour) // an hour after they entered, without a poll
	var admitted []string
	for len(admitted) < 80 {
		now = now.Add(200 * time.Millisecond) // 2 per step
		for _, v := range vs[len(admitted):min(len(vs), len(admitted)+10)] {
			mustStatus(t, s, "r", v, now) // those near the head poll
		}
		res := mustAdmit(t, s, "r", now)
		if res.Skipped != 0 {
			t.Fatalf("at %v: %d present visitors passed over", now.Sub(t0), res.Skipped)
		}
		admitted = append(admitted, res.Admitted...)
	}
	if want := vs[:len(admitted)]; !slices.Equal(admitted, want) {
		t.Errorf("admitted %v, want %v", admitted, want)
	}
}

// testPresenceReturnedFillStep: when the parked visitors who came back
// fill a step, nobody else is taken: the cap holds.
func testPresenceReturnedFillStep(t *testing.T, s queue.Store) {
	set := settings(2, 1) // batch 1 per 100 ms step, bucket of 2
	set.PresenceTimeout, set.ClaimWindow, set.ActiveTTL = 5*time.Second, 30*time.Second, time.Minute
	fill(t, s, "r", set, 3)
	if got := mustAdmit(t, s, "r", t0).Admitted; !slices.Equal(got, []string{"v1"}) {
		t.Fatalf("first step admitted %v, want [v1]", got)
	}
	if res := mustAdmit(t, s, "r", t0.Add(6*time.Second)); len(res.Admitted) != 0 || res.Skipped != 2 {
		t.Fatalf("step with v2 and v3 absent = %+v, want both parked", res)
	}
	mustStatus(t, s, "r", "v2", t0.Add(6*time.Second)) // back
	mustEnter(t, s, "r", "v4", t0.Add(6*time.Second))  // present, behind it
	res := mustAdmit(t, s, "r", t0.Add(7*time.Second)) // one slot left
	if !slices.Equal(res.Admitted, []string{"v2"}) {
		t.Errorf("step with one slot = %+v, want [v2] only", res)
	}
	if st := mustStats(t, s, "r", t0.Add(7*time.Second)); st.Active > set.MaxActive {
		t.Errorf("%d active, over MaxActive %d", st.Active, set.MaxActive)
	}
}

// pausedGhosts fills room with 10 visitors in a paused room (presence
// timeout 5 s, batch 10 per 100 ms step) and runs a step every 0.5 s from
// t0 until pause has passed, while v1, v3, v5, v7 and v9 poll every 0.5 s
// and the others never do. It opens the room at t0+pause and returns the
// present and the ghosts.
func pausedGhosts(t *testing.T, s queue.Store, room string, pause time.Duration) (present, ghosts []string) {
	t.Helper()
	set := settings(100, 100)
	set.PresenceTimeout = 5 * time.Second
	set.State = queue.Paused
	vs := fill(t, s, room, set, 10)
	for i, v := range vs {
		if i%2 == 0 {
			present = append(present, v)
		} else {
			ghosts = append(ghosts, v)
		}
	}
	for at := time.Duration(0); at < pause; at += 500 * time.Millisecond {
		now := t0.Add(at)
		if at > 0 {
			for _, v := range present {
				mustStatus(t, s, room, v, now)
			}
		}
		if res := mustAdmit(t, s, room, now); len(res.Admitted) != 0 || res.Skipped != 0 {
			t.Fatalf("step in the paused room at %v = %+v, want nobody admitted or parked", at, res)
		}
	}
	for _, v := range present {
		mustStatus(t, s, room, v, t0.Add(pause))
	}
	set.State = queue.Open
	mustPut(t, s, room, set)
	return present, ghosts
}

// testPresencePausedGhosts (issue 21 §2, found black-box): a room paused
// with 10 visitors near the front, 5 of whom poll every 0.5 s for 7 s
// (presence timeout 5 s) and 5 never. At the opening the step admits the
// present and parks the ghosts: presence counted while the room was paused.
func testPresencePausedGhosts(t *testing.T, s queue.Store) {
	present, ghosts := pausedGhosts(t, s, "r", 7*time.Second)
	open := t0.Add(7 * time.Second)
	res := mustAdmit(t, s, "r", open)
	if !slices.Equal(res.Admitted, present) || res.Skipped != 5 {
		t.Fatalf("first step at the opening = %+v, want %v admitted and the 5 ghosts parked", res, present)
	}
	if st := mustStats(t, s, "r", open); st.AdmittedTotal != 5 || st.Active != 5 || st.Waiting != 0 {
		t.Errorf("stats after the opening = admitted %d, active %d, waiting %d; want 5, 5, 0", st.AdmittedTotal, st.Active, st.Waiting)
	}
	// A ghost who comes back is next in line, as after any parking.
	if e := mustStatus(t, s, "r", ghosts[2], open.Add(time.Second)); e.Status != queue.Waiting || e.Position != 1 {
		t.Errorf("%s back after the opening = %+v, want waiting at 1", ghosts[2], e)
	}

	// A pause shorter than the timeout: at the opening the ghosts are not
	// absent yet, and still not admitted, since no poll has seen them; the
	// present behind them are. They are parked when the timeout runs out.
	present, ghosts = pausedGhosts(t, s, "short", 3*time.Second)
	open = t0.Add(3 * time.Second)
	res = mustAdmit(t, s, "short", open)
	if !slices.Equal(res.Admitted, present) || res.Skipped != 0 {
		t.Fatalf("first step after a 3 s pause = %+v, want %v admitted, the ghosts passed over in line", res, present)
	}
	if st := mustStats(t, s, "short", open); st.Waiting != 5 || st.HeadSeq != 2 {
		t.Errorf("stats after the opening = waiting %d, head %d; want the 5 ghosts waiting from v2", st.Waiting, st.HeadSeq)
	}
	var skipped int64
	for now := open; now.Before(t0.Add(6 * time.Second)); now = now.Add(500 * time.Millisecond) {
		res := mustAdmit(t, s, "short", now)
		if len(res.Admitted) != 0 {
			t.Fatalf("step at %v admitted %v, want no ghost", now.Sub(t0), res.Admitted)
		}
		skipped += res.Skipped
	}
	if st := mustStats(t, s, "short", t0.Add(6*time.Second)); skipped != 5 || st.AdmittedTotal != 5 {
		t.Errorf("after the timeout: %d parked, %d admitted; want the 5 ghosts parked (%v), 5 admitted", skipped, st.AdmittedTotal, ghosts)
	}
}

// testPresencePausedPresent: visitors who poll while the room is paused
// are admitted at its opening, however long the pause, and so is one whose
// only poll came within the timeout before the opening; a visitor who
// entered after the last paused step is watched from the opening on, as
// in an open room.
func testPresencePausedPresent(t *testing.T, s queue.Store) {
	set := settings(100, 100)
	set.PresenceTimeout = 5 * time.Second
	set.State = queue.Paused
	fill(t, s, "r", set, 3)
	open := t0.Add(time.Minute)
	for at := time.Duration(0); at < time.Minute; at += 500 * time.Millisecond {
		now := t0.Add(at)
		if at%(1500*time.Millisecond) == 0 {
			mustStatus(t, s, "r", "v1", now)
			mustStatus(t, s, "r", "v2", now)
		}
		mustAdmit(t, s, "r", now)
	}
	mustStatus(t, s, "r", "v3", open.Add(-4*time.Second))
	mustEnter(t, s, "r", "v4", open.Add(-100*time.Millisecond))
	set.State = queue.Open
	mustPut(t, s, "r", set)
	res := mustAdmit(t, s, "r", open)
	if want := []string{"v1", "v2", "v3", "v4"}; !slices.Equal(res.Admitted, want) || res.Skipped != 0 {
		t.Errorf("step at the opening = %+v, want %v admitted, nobody parked", res, want)
	}
}

// testPresencePreQueueGhosts: the same at an opening draw. Pre-queue
// polls never reach the store (the view answers them), so a drawn entrant
// is admitted only once a poll after the opening has seen it: the present
// are admitted in draw order as they poll, and the ghosts are parked when
// the timeout runs out, never admitted.
func testPresencePreQueueGhosts(t *testing.T, s queue.Store) {
	opens := t0.Add(time.Hour)
	set := drawSettings(opens)
	set.PresenceTimeout = 5 * time.Second
	mustPut(t, s, "r", set)
	var entrants []string
	for i := range 10 {
		v := fmt.Sprintf("p%d", i)
		mustEnter(t, s, "r", v, t0.Add(time.Duration(i)*time.Second))
		entrants = append(entrants, v)
	}
	for now := opens.Add(-3 * time.Second); now.Before(opens); now = now.Add(500 * time.Millisecond) {
		if res := mustAdmit(t, s, "r", now); len(res.Admitted) != 0 {
			t.Fatalf("step before the opening admitted %v", res.Admitted)
		}
	}
	order := queue.DrawOrder(mustStats(t, s, "r", t0).Draw.Seed, entrants)
	var present, ghosts []string
	for i, v := range order { // a ghost at the head
		if i%2 == 1 {
			present = append(present, v)
		} else {
			ghosts = append(ghosts, v)
		}
	}
	if res := mustAdmit(t, s, "r", opens); len(res.Admitted) != 0 || res.Skipped != 0 {
		t.Fatalf("step at the opening = %+v, want nobody admitted before a poll, nobody parked", res)
	}
	var admitted []string
	var skipped int64
	for now := opens.Add(500 * time.Millisecond); !now.After(opens.Add(6 * time.Second)); now = now.Add(500 * time.Millisecond) {
		for _, v := range present {
			if !slices.Contains(admitted, v) {
				mustStatus(t, s, "r", v, now)
			}
		}
		res := mustAdmit(t, s, "r", now)
		admitted = append(admitted, res.Admitted...)
		skipped += res.Skipped
	}
	if !slices.Equal(admitted, present) || skipped != 5 {
		t.Errorf("after the opening: admitted %v with %d parked; want %v in draw order, the ghosts %v parked", admitted, skipped, present, ghosts)
	}
	if st := mustStats(t, s, "r", opens.Add(6*time.Second)); st.AdmittedTotal != 5 || st.Waiting != 0 {
		t.Errorf("stats after the opening = admitted %d, waiting %d; want 5, 0", st.AdmittedTotal, st.Waiting)
	}
}
