package queuetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"usher/internal/queue"
)

// Opening is the opening of issue 31 §1, simulated on the store with the
// suite's clock: Entrants visitors enter a paused room evenly over the
// ArriveOver before it opens; a share of those in the first Head places
// are ghosts (never poll), spread through them; the others poll every
// 1.5 s from 1.5 s after entering, as the near zone's pacing tells them.
// Steps run every interval from the first entry.
type Opening struct {
	Entrants, Head int
	GhostShare     float64
	ArriveOver     time.Duration
	Settings       queue.Settings
}

// FirstPresent returns how long after the opening the first k present
// visitors were all admitted, and how many ghosts were admitted by then.
func (o Opening) FirstPresent(t testing.TB, s queue.Store, room string, k int) (time.Duration, int) {
	t.Helper()
	set := o.Settings
	set.State = queue.Paused
	mustPut(t, s, room, set)
	start := t0
	opens := start.Add(o.ArriveOver)
	ghostEvery := 0
	if o.GhostShare > 0 {
		ghostEvery = int(1 / o.GhostShare)
	}
	type visitor struct {
		id      string
		entered time.Time
		ghost   bool
	}
	vs := make([]visitor, o.Entrants)
	for i := range vs {
		vs[i] = visitor{
			id:      fmt.Sprintf("v%04d", i+1),
			entered: start.Add(o.ArriveOver * time.Duration(i) / time.Duration(o.Entrants)),
			ghost:   ghostEvery > 0 && i < o.Head && i%ghostEvery == 0,
		}
	}
	const poll = 1500 * time.Millisecond
	tick := 100 * time.Millisecond
	admitted := map[string]bool{}
	entered, present, ghosts := 0, 0, 0
	for now := start; now.Before(opens.Add(5 * time.Minute)); now = now.Add(tick) {
		for entered < len(vs) && !vs[entered].entered.After(now) {
			mustEnter(t, s, room, vs[entered].id, now)
			entered++
		}
		if now.Equal(opens) {
			set.State = queue.Open
			mustPut(t, s, room, set)
		}
		for _, v := range vs[:entered] {
			since := now.Sub(v.entered)
			if !v.ghost && !admitted[v.id] && since >= poll && (since-tick)/poll < since/poll { // a poll in the last tick
				mustStatus(t, s, room, v.id, now)
			}
		}
		if now.Sub(start)%set.Interval == 0 {
			for _, id := range mustAdmit(t, s, room, now).Admitted {
				admitted[id] = true
				var i int
				fmt.Sscanf(id, "v%d", &i)
				if vs[i-1].ghost {
					ghosts++
				} else if present++; present == k {
					return now.Sub(opens), ghosts
				}
			}
		}
	}
	t.Fatalf("%d of %d present visitors admitted 5 minutes after the opening", present, k)
	return 0, 0
}

// testOpeningNoStall (issue 31 §1): at an opening, present visitors are
// admitted without waiting on the ghosts ahead of them: the first 100 of
// 1,000 entrants who arrived in the 10 s before it, 30 % of the first 300
// of them ghosts, are admitted within 1.1 times as long as when there are
// no ghosts, and no ghost is admitted by then.
func testOpeningNoStall(t *testing.T, s queue.Store) {
	set := settings(10_000, 20)
	set.Interval = time.Second
	set.PresenceTimeout = 10 * time.Second
	o := Opening{Entrants: 1000, Head: 300, ArriveOver: 10 * time.Second, Settings: set}
	clean, _ := o.FirstPresent(t, s, "clean", 100)
	o.GhostShare = 0.3
	ghosted, ghosts := o.FirstPresent(t, s, "ghosts", 100)
	t.Logf("first 100 present admitted %v after the opening with 30 %% ghosts, %v without", ghosted, clean)
	if ghosted > clean*11/10 || ghosts != 0 {
		t.Errorf("first 100 present admitted %v after the opening with ghosts (%d ghosts admitted), %v without; want at most 1.1× and no ghost",
			ghosted, ghosts, clean)
	}
}

// testOpeningBehindGhost (issue 31 §1, the README's walk-through): alice
// and bob enter a paused room and are marked at a paused step; carol
// enters after the last paused step. The room opens; bob and carol poll,
// alice never does. The step after their polls admits them both, though
// alice, ahead of them, has not reached her presence timeout: the present
// never wait on a ghost. When alice comes back later, she is next.
func testOpeningBehindGhost(t *testing.T, s queue.Store) {
	set := settings(100, 10)
	set.Interval = time.Second
	set.PresenceTimeout = 10 * time.Second
	set.State = queue.Paused
	mustPut(t, s, "r", set)
	mustEnter(t, s, "r", "alice", t0)
	mustEnter(t, s, "r", "bob", t0)
	mustAdmit(t, s, "r", t0.Add(time.Second)) // marks both
	mustEnter(t, s, "r", "carol", t0.Add(1500*time.Millisecond))
	set.State = queue.Open
	mustPut(t, s, "r", set)
	open := t0.Add(2 * time.Second)
	if res := mustAdmit(t, s, "r", open); len(res.Admitted) != 0 {
		t.Fatalf("step at the opening = %+v, want nobody: no poll has shown anyone there since", res)
	}
	mustStatus(t, s, "r", "bob", open.Add(500*time.Millisecond))
	mustStatus(t, s, "r", "carol", open.Add(500*time.Millisecond))
	res := mustAdmit(t, s, "r", open.Add(time.Second))
	if want := []string{"bob", "carol"}; !slices.Equal(res.Admitted, want) || res.Skipped != 0 {
		t.Fatalf("step after bob's and carol's polls = %+v, want %v admitted, alice passed over", res, want)
	}
	if e := mustStatus(t, s, "r", "alice", open.Add(2*time.Second)); e.Status != queue.Waiting || e.Position != 1 {
		t.Errorf("alice after the opening = %+v, want waiting at 1, her place kept", e)
	}
	if res := mustAdmit(t, s, "r", open.Add(3*time.Second)); !slices.Equal(res.Admitted, []string{"alice"}) {
		t.Errorf("step after alice's poll = %+v, want alice", res)
	}
}
