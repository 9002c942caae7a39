package capacity_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"usher/internal/capacity"
	"usher/internal/queue/forecast"
)

func seed002(t *testing.T) capacity.Plan {
	t.Helper()
	in := capacity.DefaultInput()
	in.Pool, in.ServiceTime = 10, 76*time.Millisecond
	p, err := capacity.Make(in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPollRate: a line within the near zone polls once per fast interval
// per place, all of it at the store; places far back add one poll per
// longest interval each.
func TestPollRate(t *testing.T) {
	t.Parallel()
	s := seed002(t).RoomSettings()
	v := capacity.LineView(s, 0)
	fast, longest := forecast.FastPoll.Seconds(), forecast.MaxPoll.Seconds()
	zone := v.Near()
	if all, store := capacity.PollRate(v, zone); math.Abs(all-float64(zone)/fast) > 1e-9 || math.Abs(store-all) > 1e-9 {
		t.Errorf("PollRate over the near zone (%d places) = %v, %v; want %v for both", zone, all, store, float64(zone)/fast)
	}
	a, sa := capacity.PollRate(v, 10_000_000)
	b, sb := capacity.PollRate(v, 10_001_000)
	if math.Abs(b-a-1000/longest) > 1e-6 || sa != sb {
		t.Errorf("1,000 more places far back add %v polls/s (store %v → %v), want %v (store unchanged)", b-a, sa, sb, 1000/longest)
	}
	if all, _ := capacity.PollRate(v, 0); all != 0 {
		t.Errorf("an empty line polls %v/s", all)
	}
}

func TestMakeScale(t *testing.T) {
	t.Parallel()
	p := seed002(t) // 90/s, max_active 16,200
	u := capacity.DefaultUnits()
	sc, err := capacity.MakeScale(p, capacity.ScaleInput{Visitors: 100_000, ArriveOver: 30 * time.Second, Units: u})
	if err != nil {
		t.Fatal(err)
	}
	if sc.PeakWaiting != 97_300 || sc.PeakActive != 2_700 || math.Abs(sc.EnterRate-100_000.0/30) > 1e-9 {
		t.Errorf("peak waiting %d, active %d, enters %v/s; want 97,300, 2,700 (90/s × 30 s), 3,333.3", sc.PeakWaiting, sc.PeakActive, sc.EnterRate)
	}
	if sc.LastAdmitted.Round(time.Second) != 1111*time.Second {
		t.Errorf("last admitted at %v, want 100,000 ÷ 90/s = 1,111 s", sc.LastAdmitted)
	}
	line, store := capacity.PollRate(capacity.LineView(p.RoomSettings(), 97_300), 97_300)
	if sc.Polls != line+90 || sc.StorePolls != store+90 {
		t.Errorf("polls %v (store %v), want PollRate's %v (%v) + 90 admissions", sc.Polls, sc.StorePolls, line, store)
	}
	if want := 97_300 * u.WaitingBytes; sc.WaitingMemory != want {
		t.Errorf("waiting memory %v, want %v", sc.WaitingMemory, want)
	}
	if want := int(math.Ceil(sc.Polls/u.InstancePolls + sc.EnterRate/u.InstanceEnters)); sc.Instances != want || sc.Primaries != 1 {
		t.Errorf("instances %d, primaries %d; want %d and 1", sc.Instances, sc.Primaries, want)
	}
	if sc.Bandwidth != sc.Polls*u.PollAnswerBytes {
		t.Errorf("bandwidth %v, want %v", sc.Bandwidth, sc.Polls*u.PollAnswerBytes)
	}

	// Arrivals slower than the admissions: no line.
	slow, err := capacity.MakeScale(p, capacity.ScaleInput{Visitors: 1_000, ArriveOver: time.Minute, Units: u})
	if err != nil {
		t.Fatal(err)
	}
	if slow.PeakWaiting != 0 || slow.Polls != 90 || len(slow.Notes) == 0 {
		t.Errorf("a slow sale: peak %d, polls %v, notes %q; want 0, the 90 admissions' polls, a note", slow.PeakWaiting, slow.Polls, slow.Notes)
	}

	// A hundred million in ten minutes: one room's store calls outgrow a
	// primary, which more primaries cannot share.
	hot, err := capacity.MakeScale(p, capacity.ScaleInput{Visitors: 100_000_000, ArriveOver: 10 * time.Minute, Units: u})
	if err != nil {
		t.Fatal(err)
	}
	if hot.Primaries < 2 || !strings.Contains(strings.Join(hot.Notes, "\n"), "give the room 2 shards") {
		t.Errorf("a hot room: %d primaries, notes %q; want at least 2 and the note that names the shards", hot.Primaries, hot.Notes)
	}

	for _, in := range []capacity.ScaleInput{
		{Visitors: 0, ArriveOver: time.Minute, Units: u},
		{Visitors: 10, ArriveOver: 0, Units: u},
		{Visitors: 10, ArriveOver: time.Minute, Units: capacity.Units{}},
	} {
		if _, err := capacity.MakeScale(p, in); !errors.Is(err, capacity.ErrInvalid) {
			t.Errorf("MakeScale(%+v) = %v, want ErrInvalid", in, err)
		}
	}
}
