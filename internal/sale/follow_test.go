package sale_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"usher/internal/sale"
	"usher/internal/wire"
)

// TestFollowSeatMapFansOut: many followers of one schedule get each change
// as one event made once (the same *Encoded), since the version each
// had; a follower that stops reading misses nothing: its events still
// chain from version to version up to the last status.
func TestFollowSeatMapFansOut(t *testing.T) {
	r := newRig(t, 200)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 50
	chans := make([]<-chan *sale.Encoded, n)
	firsts := make([]wire.SeatMapStatus, n)
	for i := range chans {
		var err error
		if chans[i], err = r.svc.FollowSeatMap(ctx, r.sched.ID, ""); err != nil {
			t.Fatal(err)
		}
		firsts[i] = decodeEvent(t, recv(t, chans[i]))
	}
	lagging, lagFirst := chans[n-1], firsts[n-1]
	chans = chans[:n-1]

	seat := r.seats[7]
	if _, err := r.svc.Hold(ctx, r.sched.ID, "bob", []int64{seat}); err != nil {
		t.Fatal(err)
	}
	got := make([]*sale.Encoded, len(chans))
	var wg sync.WaitGroup
	for i, ch := range chans {
		wg.Go(func() {
			prev := firsts[i].Version
			for got[i] == nil {
				e := recv(t, ch)
				st := decodeEvent(t, e)
				if st.Since != prev || st.Changes == nil {
					t.Errorf("follower %d: event since %q, want since %q with changes", i, st.Since, prev)
					return
				}
				if slices.Contains(st.Changes.Held, seat) {
					got[i] = e
				}
				prev = st.Version
			}
		})
	}
	wg.Wait()
	for i := range got {
		if got[i] != got[0] {
			t.Fatalf("followers 0 and %d got the hold in different events: one event per follower, not one per change", i)
		}
	}

	if _, err := r.svc.Hold(ctx, r.sched.ID, "carol", []int64{r.seats[9]}); err != nil {
		t.Fatal(err)
	}
	st := decodeEvent(t, recv(t, chans[0]))
	for !slices.Contains(st.Changes.Held, r.seats[9]) {
		st = decodeEvent(t, recv(t, chans[0]))
	}
	// The lagging follower catches up from its own version.
	prev, want := lagFirst.Version, st.Version
	held := map[int64]bool{}
	for prev != want {
		ev := decodeEvent(t, recv(t, lagging))
		if ev.Since != prev || ev.Changes == nil {
			t.Fatalf("lagging follower: event since %q, want since %q", ev.Since, prev)
		}
		for _, id := range ev.Changes.Held {
			held[id] = true
		}
		prev = ev.Version
	}
	if !held[seat] || !held[r.seats[9]] {
		t.Errorf("lagging follower saw seats %v held, want %d and %d", held, seat, r.seats[9])
	}
}

// recv returns the next event; the bound only turns a hang into a failure.
func recv(t *testing.T, ch <-chan *sale.Encoded) *sale.Encoded {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Error("the follow channel closed")
			return &sale.Encoded{JSON: []byte(`{}`)}
		}
		return e
	case <-time.After(time.Minute):
		t.Error("no event within a minute")
		return &sale.Encoded{JSON: []byte(`{}`)}
	}
}

func decodeEvent(t testing.TB, e *sale.Encoded) wire.SeatMapStatus {
	t.Helper()
	var st wire.SeatMapStatus
	if err := json.Unmarshal(e.JSON, &st); err != nil || st.Version != e.Version {
		t.Errorf("event %s named %s: %v", e.JSON, e.Version, err)
	}
	return st
}

// TestFollowerJoiningAfterAChange: a follower that joins after a change,
// with a snapshot newer than the watcher's, does not keep that change from
// the followers before it, and continues from its own version.
func TestFollowerJoiningAfterAChange(t *testing.T) {
	r := newRig(t, 200)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	early, err := r.svc.FollowSeatMap(ctx, r.sched.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	v0 := decodeEvent(t, recv(t, early)).Version
	if _, err := r.svc.Hold(ctx, r.sched.ID, "bob", []int64{r.seats[3]}); err != nil {
		t.Fatal(err)
	}
	late, err := r.svc.FollowSeatMap(ctx, r.sched.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	v1 := decodeEvent(t, recv(t, late)).Version
	if v1 == v0 {
		t.Fatal("the late follower's first status does not show the hold")
	}
	for prev := v0; prev != v1; { // the early follower reaches v1
		st := decodeEvent(t, recv(t, early))
		if st.Since != prev {
			t.Fatalf("early follower: event since %s, want since %s", st.Since, prev)
		}
		prev = st.Version
	}
	if _, err := r.svc.Hold(ctx, r.sched.ID, "carol", []int64{r.seats[5]}); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan *sale.Encoded{early, late} {
		if st := decodeEvent(t, recv(t, ch)); st.Since != v1 || st.Changes == nil || !slices.Equal(st.Changes.Held, []int64{r.seats[5]}) {
			t.Errorf("after carol's hold: %+v, want her seat held since %s", st, v1)
		}
	}
}
