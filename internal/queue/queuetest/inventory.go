package queuetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"usher/internal/queue"
)

func mustSetInventory(t testing.TB, s queue.Store, room string, units int64) {
	t.Helper()
	if err := s.SetInventory(context.Background(), room, units); err != nil {
		t.Fatalf("SetInventory(%s, %d): %v", room, units, err)
	}
}

// testInventorySoldOut: an inventory of 0 makes an open room sold out
// without touching its settings: newcomers are refused with ErrRoomClosed,
// waiting visitors keep their places, nobody is admitted; inventory coming
// back reopens it. An operator's closed still wins, and PutRoom keeps the
// inventory.
func testInventorySoldOut(t *testing.T, s queue.Store) {
	ctx := context.Background()
	set := settings(10, 100)
	fill(t, s, "r", set, 2)
	if st := mustStats(t, s, "r", t0); st.Inventory.Known || st.EffectiveState() != queue.Open {
		t.Fatalf("a new room's inventory = %+v, effective state %s; want unknown, open", st.Inventory, st.EffectiveState())
	}
	mustSetInventory(t, s, "r", 0)
	st := mustStats(t, s, "r", t0)
	if want := (queue.Inventory{Units: 0, Known: true}); st.Inventory != want {
		t.Errorf("inventory after SetInventory(0) = %+v, want %+v", st.Inventory, want)
	}
	if st.Settings != set || st.EffectiveState() != queue.SoldOut {
		t.Errorf("after SetInventory(0): settings %+v, effective state %s; want the settings unchanged, sold_out", st.Settings, st.EffectiveState())
	}
	if _, _, err := s.Enter(ctx, "r", "new", t0, queue.EnterOptions{}); !errors.Is(err, queue.ErrRoomClosed) {
		t.Errorf("Enter into a room without inventory: err = %v, want ErrRoomClosed", err)
	}
	if e := mustEnter(t, s, "r", "v2", t0); e.Status != queue.Waiting || e.Position != 2 {
		t.Errorf("re-Enter of a waiting visitor into a sold-out room = %+v, want its place", e)
	}
	if res := mustAdmit(t, s, "r", t0.Add(time.Second)); len(res.Admitted) != 0 {
		t.Errorf("a room without inventory admitted %v", res.Admitted)
	}
	set.MaxActive = 11 // an operator's change keeps the inventory
	mustPut(t, s, "r", set)
	if st := mustStats(t, s, "r", t0); st.Inventory.Units != 0 || !st.Inventory.Known {
		t.Errorf("inventory after PutRoom = %+v, want 0, known", st.Inventory)
	}
	mustSetInventory(t, s, "r", 5)
	if st := mustStats(t, s, "r", t0); st.EffectiveState() != queue.Open {
		t.Errorf("effective state with 5 units = %s, want open", st.EffectiveState())
	}
	if res := mustAdmit(t, s, "r", t0.Add(2*time.Second)); !slices.Equal(res.Admitted, []string{"v1", "v2"}) {
		t.Errorf("admitted after the inventory came back = %v, want [v1 v2]", res.Admitted)
	}
	mustEnter(t, s, "r", "new", t0.Add(2*time.Second))

	set.State = queue.Closed
	mustPut(t, s, "r", set)
	mustSetInventory(t, s, "r", 0)
	if st := mustStats(t, s, "r", t0); st.EffectiveState() != queue.Closed {
		t.Errorf("closed room without inventory: effective state %s, want closed (the operator wins)", st.EffectiveState())
	}
}

// testInventoryCap: while the inventory is known, admission and
// passthrough keep the active set below ceil(VisitorsPerUnit × units), and
// below MaxActive; VisitorsPerUnit 0 turns the cap off.
func testInventoryCap(t *testing.T, s queue.Store) {
	set := settings(7, 1000)
	set.VisitorsPerUnit = 1.5
	vs := fill(t, s, "r", set, 20)
	mustSetInventory(t, s, "r", 3) // ceil(1.5 × 3) = 5
	at := t0
	step := func(want ...string) {
		t.Helper()
		at = at.Add(time.Second)
		if res := mustAdmit(t, s, "r", at); !slices.Equal(res.Admitted, want) {
			t.Errorf("admitted %v, want %v", res.Admitted, want)
		}
	}
	step(vs[:5]...)
	step()
	mustSetInventory(t, s, "r", 4) // 6
	step(vs[5])
	mustSetInventory(t, s, "r", 100) // MaxActive 7 binds
	step(vs[6])
	if st := mustStats(t, s, "r", at); st.Active != 7 {
		t.Errorf("active = %d, want MaxActive 7", st.Active)
	}

	// Passthrough keeps to the cap too.
	set.MaxActive = 100
	mustPut(t, s, "p", set)
	mustSetInventory(t, s, "p", 1) // ceil(1.5) = 2
	for i, want := range []queue.EntryStatus{queue.Active, queue.Active, queue.Waiting} {
		if e := mustEnter(t, s, "p", vs[i], t0); e.Status != want {
			t.Errorf("Enter %d with 1 unit = %+v, want %s", i+1, e, want)
		}
	}

	// Off: only MaxActive counts.
	set.VisitorsPerUnit = 0
	vs = fill(t, s, "off", set, 20)
	mustSetInventory(t, s, "off", 1)
	if res := mustAdmit(t, s, "off", t0.Add(time.Second)); len(res.Admitted) != 20 {
		t.Errorf("visitors_per_unit 0 with 1 unit admitted %d, want all 20", len(res.Admitted))
	}
}
