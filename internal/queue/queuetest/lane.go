package queuetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"usher/internal/queue"
)

// laneCode is a lane code valid for an hour of the suite's clock.
func laneCode(id string, uses int64) queue.LaneCode {
	return queue.LaneCode{ID: id, Uses: uses, ExpiresAt: t0.Add(time.Hour)}
}

// inLane is Enter's options for the priority lane with code c.
func inLane(c queue.LaneCode) queue.EnterOptions { return queue.EnterOptions{Lane: &c} }

func mustEnterLane(t testing.TB, s queue.Store, room, visitor string, code queue.LaneCode, now time.Time) (queue.Entry, bool) {
	t.Helper()
	e, created, err := s.Enter(context.Background(), room, visitor, now, queue.EnterOptions{Lane: &code})
	if err != nil {
		t.Fatalf("EnterLane(%s, %s): %v", room, visitor, err)
	}
	return e, created
}

// fillLane makes a paused room with share whose main line holds m1…mM and
// whose lane holds l1…lL, then sets it to want.
func fillLane(t testing.TB, s queue.Store, room string, want queue.Settings, m, l int) (main, lane []string) {
	t.Helper()
	paused := want
	paused.State = queue.Paused
	mustPut(t, s, room, paused)
	code := laneCode("fill", int64(max(1, l)))
	for i := range max(m, l) {
		if i < m {
			main = append(main, fmt.Sprintf("m%d", i+1))
			mustEnter(t, s, room, main[i], t0)
		}
		if i < l {
			lane = append(lane, fmt.Sprintf("l%d", i+1))
			mustEnterLane(t, s, room, lane[i], code, t0)
		}
	}
	mustPut(t, s, room, want)
	return main, lane
}

// testLaneFIFO: lane places are numbered within the lane (Seq 0, exact
// positions), re-entry keeps them and uses nothing, the lane is admitted
// in its order, and leaving it works.
func testLaneFIFO(t *testing.T, s queue.Store) {
	set := settings(100, 10) // a step of 1
	set.PriorityShare = 1
	_, lane := fillLane(t, s, "r", set, 2, 4)
	for i, v := range lane {
		e := mustStatus(t, s, "r", v, t0)
		if e.Status != queue.Waiting || e.Seq != 0 || e.Position != int64(i+1) {
			t.Fatalf("Status(%s) = %+v, want waiting in the lane at %d with seq 0", v, e, i+1)
		}
	}
	// Re-entry, with the code or without, keeps the place and uses
	// nothing: the fill code had exactly 4 uses.
	if e, created := mustEnterLane(t, s, "r", "l2", laneCode("fill", 4), t0); created || e.Position != 2 {
		t.Errorf("EnterLane(l2) again = %+v, created %v; want its place 2, not created", e, created)
	}
	if e := mustEnter(t, s, "r", "l3", t0); e.Position != 3 || e.Seq != 0 {
		t.Errorf("Enter(l3) = %+v; want its lane place 3", e)
	}
	// A visitor of the main line keeps its place.
	if e, created := mustEnterLane(t, s, "r", "m2", laneCode("other", 1), t0); created || e.Seq != 2 {
		t.Errorf("EnterLane(m2) = %+v, created %v; want its main place (seq 2)", e, created)
	}
	if st := mustStats(t, s, "r", t0); st.Lane != 4 || st.Waiting != 6 {
		t.Errorf("Stats: lane %d, waiting %d; want 4 and 6", st.Lane, st.Waiting)
	}
	if err := s.Leave(context.Background(), "r", "l2"); err != nil {
		t.Fatal(err)
	}
	if e := mustStatus(t, s, "r", "l3", t0); e.Position != 2 {
		t.Errorf("after l2 left, l3 at %d, want 2", e.Position)
	}
	var got []string
	for i := range 5 {
		got = append(got, mustAdmit(t, s, "r", t0.Add(time.Duration(i+1)*100*time.Millisecond)).Admitted...)
	}
	if want := []string{"l1", "l3", "l4", "m1", "m2"}; !slices.Equal(got, want) {
		t.Errorf("admitted %v, want %v (the lane first, in its order, at share 1)", got, want)
	}
}

// testLaneShare: over many steps with both lines long, the lane gets
// exactly its share of the admissions (the whole part of share × the
// total so far), the total is the rate's and the cap holds.
func testLaneShare(t *testing.T, s queue.Store) {
	for _, share := range []float64{0.25, 0.3} {
		room := fmt.Sprintf("share-%v", share)
		room = strings.ReplaceAll(room, ".", "-")
		set := settings(1000, 40) // a step of 4 every 100 ms
		set.PriorityShare = share
		fillLane(t, s, room, set, 300, 300)
		var total, inLane int64
		now := t0
		for range 50 {
			now = now.Add(100 * time.Millisecond)
			r := mustAdmit(t, s, room, now)
			if len(r.Admitted) > 5 {
				t.Fatalf("share %v: a step admitted %d, more than Batch+1", share, len(r.Admitted))
			}
			for _, v := range r.Admitted {
				total++
				if v[0] == 'l' {
					inLane++
				}
			}
			if want := int64(math.Floor(share*float64(total) + 1e-9)); inLane != want {
				t.Fatalf("share %v: lane admitted %d of %d, want %d", share, inLane, total, want)
			}
		}
		if total < 195 || total > 205 {
			t.Errorf("share %v: admitted %d in 5 s at 40/s, want about 200", share, total)
		}
		if st := mustStats(t, s, room, now); st.Active != total || st.Lane != 300-inLane {
			t.Errorf("share %v: stats active %d, lane %d; want %d and %d", share, st.Active, st.Lane, total, 300-inLane)
		}
	}
	// The cap holds with a lane.
	set := settings(10, 1000)
	set.PriorityShare = 0.5
	fillLane(t, s, "cap", set, 20, 20)
	for i := range 5 {
		mustAdmit(t, s, "cap", t0.Add(time.Duration(i+1)*time.Second))
	}
	if st := mustStats(t, s, "cap", t0.Add(5*time.Second)); st.Active != 10 || st.Lane != 15 {
		t.Errorf("cap 10: active %d, lane %d; want 10 and 15", st.Active, st.Lane)
	}
}

// testLaneEmptyLines: an empty lane leaves every admission to the main
// line, an empty main line every admission to the lane.
func testLaneEmptyLines(t *testing.T, s queue.Store) {
	set := settings(1000, 40)
	set.PriorityShare = 0.5
	fillLane(t, s, "main", set, 20, 0)
	if got := mustAdmit(t, s, "main", t0.Add(time.Second)).Admitted; len(got) != 4 || got[0] != "m1" {
		t.Errorf("empty lane: admitted %v, want m1…m4", got)
	}
	fillLane(t, s, "lane", set, 0, 20)
	if got := mustAdmit(t, s, "lane", t0.Add(time.Second)).Admitted; len(got) != 4 || got[0] != "l1" {
		t.Errorf("empty main line: admitted %v, want l1…l4", got)
	}
	// A main line shorter than its part: the lane takes the rest.
	fillLane(t, s, "short", set, 1, 20)
	if got := mustAdmit(t, s, "short", t0.Add(time.Second)).Admitted; len(got) != 4 || !slices.Contains(got, "m1") {
		t.Errorf("main line of 1: admitted %v, want m1 and three of the lane", got)
	}
}

// testLaneCodes: a code makes at most Uses places (a passthrough
// included), refused after with ErrLaneCodeUsed; codes count apart; a
// room without a lane refuses lane entries.
func testLaneCodes(t *testing.T, s queue.Store) {
	ctx := context.Background()
	set := settings(1000, 10)
	set.PriorityShare = 0.2
	mustPut(t, s, "r", set)
	// The first passes through (an empty room), the others wait.
	if e, created := mustEnterLane(t, s, "r", "a", laneCode("c3", 3), t0); !created || e.Status != queue.Active {
		t.Errorf("EnterLane(a) into an empty room = %+v, %v; want admitted at once", e, created)
	}
	for _, v := range []string{"b", "c"} {
		if e, created := mustEnterLane(t, s, "r", v, laneCode("c3", 3), t0); !created || e.Status != queue.Active && e.Status != queue.Waiting {
			t.Errorf("EnterLane(%s) = %+v, %v; want a new place", v, e, created)
		}
	}
	if _, _, err := s.Enter(ctx, "r", "d", t0, inLane(laneCode("c3", 3))); !errors.Is(err, queue.ErrLaneCodeUsed) {
		t.Errorf("a fourth use of a 3-use code: %v, want ErrLaneCodeUsed", err)
	}
	if _, created := mustEnterLane(t, s, "r", "d", laneCode("c1", 1), t0); !created {
		t.Errorf("another code: not created")
	}
	if _, _, err := s.Enter(ctx, "r", "e", t0, inLane(laneCode("c1", 1))); !errors.Is(err, queue.ErrLaneCodeUsed) {
		t.Errorf("a second use of a single-use code: %v, want ErrLaneCodeUsed", err)
	}
	if e := mustStatus(t, s, "r", "e", t0); e.Status != queue.Gone {
		t.Errorf("a refused visitor is %+v, want gone", e)
	}
	off := settings(1000, 10)
	mustPut(t, s, "off", off)
	if _, _, err := s.Enter(ctx, "off", "a", t0, inLane(laneCode("x", 1))); !errors.Is(err, queue.ErrLanesOff) {
		t.Errorf("EnterLane into a room without a lane: %v, want ErrLanesOff", err)
	}
	if _, _, err := s.Enter(ctx, "nope", "a", t0, inLane(laneCode("x", 1))); !errors.Is(err, queue.ErrRoomNotFound) {
		t.Errorf("EnterLane into an unknown room: %v, want ErrRoomNotFound", err)
	}
	// The lane is waiting: a room with one is in use.
	mustPut(t, s, "del", settings(1000, 10))
	set.State = queue.Paused
	mustPut(t, s, "del", set)
	mustEnterLane(t, s, "del", "a", laneCode("d", 1), t0)
	if err := s.DeleteRoom(ctx, "del", false, t0); !errors.Is(err, queue.ErrRoomInUse) {
		t.Errorf("DeleteRoom with a lane visitor: %v, want ErrRoomInUse", err)
	}
}

// testLaneCodeConcurrent: many visitors redeem one 10-use code at once;
// exactly 10 get a place.
func testLaneCodeConcurrent(t *testing.T, s queue.Store) {
	set := settings(1000, 10)
	set.PriorityShare = 0.5
	set.State = queue.Paused
	mustPut(t, s, "r", set)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, used := 0, 0
	for i := range 60 {
		wg.Go(func() {
			_, created, err := s.Enter(context.Background(), "r", fmt.Sprintf("v%d", i), t0, inLane(laneCode("ten", 10)))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && created:
				ok++
			case errors.Is(err, queue.ErrLaneCodeUsed):
				used++
			default:
				t.Errorf("EnterLane: created %v, %v", created, err)
			}
		})
	}
	wg.Wait()
	if ok != 10 || used != 50 {
		t.Errorf("60 redeem a 10-use code: %d places, %d refused; want 10 and 50", ok, used)
	}
	if st := mustStats(t, s, "r", t0); st.Lane != 10 {
		t.Errorf("lane %d, want 10", st.Lane)
	}
}
