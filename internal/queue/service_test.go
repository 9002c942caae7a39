package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newQueue(t *testing.T, waiting int) (*queue.Queue, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
	q := queue.New(memqueue.New(), queue.Options{Now: c.now})
	ctx := context.Background()
	s := queue.DefaultSettings()
	s.State, s.AdmitRate, s.MaxActive = queue.Paused, 10, 1_000_000
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	for i := range waiting {
		if _, _, err := q.Enter(ctx, "r", fmt.Sprintf("v%d", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	s.State = queue.Open
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	return q, c
}

func TestStatusEstimateBound(t *testing.T) {
	ctx := context.Background()
	q, c := newQueue(t, 1000)
	if _, err := q.Admit(ctx, "r"); err != nil { // admits one batch (10)
		t.Fatal(err)
	}
	left := map[int64]bool{}
	for _, seq := range []int64{100, 200, 201, 500} {
		left[seq] = true
		if err := q.Leave(ctx, "r", fmt.Sprintf("v%d", seq)); err != nil {
			t.Fatal(err)
		}
	}
	c.t = c.t.Add(time.Second) // a Refresh would see this; the view is still the PutRoom one
	v, _ := q.View("r")
	if v.HeadSeq != 1 {
		t.Fatalf("view head = %d, want the stale 1 (read before the step)", v.HeadSeq)
	}
	exactWithin := v.Near()
	var estimates int
	var leftAhead int64
	for seq := int64(11); seq <= 1000; seq++ {
		if left[seq] {
			leftAhead++
			continue
		}
		visitor := fmt.Sprintf("v%d", seq)
		got, estimated, err := q.Status(ctx, "r", visitor, seq, c.t)
		if err != nil {
			t.Fatal(err)
		}
		if estimated != (seq-v.HeadSeq+1 > exactWithin) {
			t.Fatalf("seq %d: estimated = %v, want estimates only beyond %d from the head", seq, estimated, exactWithin)
		}
		exact := exactStatus(t, q, visitor)
		if !estimated {
			if got != exact {
				t.Fatalf("seq %d: exact answer %+v, want %+v", seq, got, exact)
			}
			continue
		}
		estimates++
		// Never better than the truth; worse by at most the leavers ahead and
		// the visitors admitted since the view was read (10).
		if d := got.Position - exact.Position; d < 0 || d > leftAhead+10 {
			t.Fatalf("seq %d: estimate %d, exact %d: off by %d, want 0..%d", seq, got.Position, exact.Position, d, leftAhead+10)
		}
	}
	if want := 990 - int(exactWithin) - len(left); estimates < want {
		t.Errorf("%d estimated answers, want the %d beyond %d from the head", estimates, want, exactWithin)
	}
}

// exactStatus reads the visitor's exact status: seq 0 is behind any head.
func exactStatus(t *testing.T, q *queue.Queue, visitor string) queue.Entry {
	t.Helper()
	e, estimated, err := q.Status(context.Background(), "r", visitor, 0, time.Time{})
	if err != nil || estimated {
		t.Fatalf("exact status of %s: %v (estimated %v)", visitor, err, estimated)
	}
	return e
}

func TestStatusStaleViewIsExact(t *testing.T) {
	ctx := context.Background()
	q, c := newQueue(t, 500)
	c.t = c.t.Add(3 * time.Second)
	if _, estimated, err := q.Status(ctx, "r", "v400", 400, time.Time{}); err != nil || estimated {
		t.Errorf("poll with a 3 s old view: estimated = %v, err = %v; want an exact answer", estimated, err)
	}
}

func TestRenew(t *testing.T) {
	ctx := context.Background()
	q, c := newQueue(t, 20)
	if _, err := q.Admit(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	exp, err := q.Renew(ctx, "r", "v1")
	if err != nil || !exp.Equal(c.t.Add(queue.DefaultSettings().ActiveTTL)) {
		t.Errorf("Renew(v1) = %v, %v; want %v", exp, err, c.t.Add(queue.DefaultSettings().ActiveTTL))
	}
	if _, err := q.Renew(ctx, "r", "v20"); !errors.Is(err, queue.ErrNotAdmitted) {
		t.Errorf("Renew of a waiting visitor: err = %v, want ErrNotAdmitted", err)
	}
}

func TestValidation(t *testing.T) {
	ctx := context.Background()
	q, _ := newQueue(t, 0)
	long := string(make([]byte, 129))
	for _, tc := range []struct{ room, visitor string }{
		{"", "v"}, {"-r", "v"}, {"R", "v"}, {"r", ""}, {"r", "has space"}, {"r", long},
	} {
		if _, _, err := q.Enter(ctx, tc.room, tc.visitor); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("Enter(%q, %q): err = %v, want ErrInvalid", tc.room, tc.visitor, err)
		}
	}
	bad := queue.DefaultSettings()
	bad.ClaimWindow = bad.ActiveTTL + time.Second
	if err := q.PutRoom(ctx, "r", bad); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("PutRoom with claim window > TTL: err = %v, want ErrInvalid", err)
	}
}

func TestRefreshMeasuresRate(t *testing.T) {
	ctx := context.Background()
	q, c := newQueue(t, 5000) // configured 10/s, interval 1 s
	// Admit 10 per second for 60 s while refreshing: the rate stays ~10/s.
	for range 600 {
		c.t = c.t.Add(100 * time.Millisecond)
		if _, err := q.Admit(ctx, "r"); err != nil {
			t.Fatal(err)
		}
		if err := refresh(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	v, _ := q.View("r")
	if v.Rate < 9 || v.Rate > 11 {
		t.Errorf("measured rate = %v, want about 10/s", v.Rate)
	}
}

// refresh runs one refresh cycle through Run with an already-cancelled
// context: Run refreshes once before it looks at ctx.
func refresh(ctx context.Context, q *queue.Queue) error {
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	return q.Run(ctx)
}

// TestSetInventory: the wrapper validates the units, and a room whose
// inventory is 0 tells visitors sold_out while its setting stays open;
// the operator's closed wins.
func TestSetInventory(t *testing.T) {
	ctx := context.Background()
	q, c := newQueue(t, 1)
	for _, bad := range []int64{-1, queue.MaxInventory + 1} {
		if err := q.SetInventory(ctx, "r", bad); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("SetInventory(%d) = %v, want ErrInvalid", bad, err)
		}
	}
	if err := q.SetInventory(ctx, "Bad Room", 1); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("SetInventory on a bad room id = %v, want ErrInvalid", err)
	}
	if err := q.SetInventory(ctx, "r", 0); err != nil {
		t.Fatal(err)
	}
	v, err := q.Room(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if got := v.RoomState(c.t); got != "sold_out" || v.Settings.State != queue.Open {
		t.Errorf("room state with 0 units = %s (setting %s), want sold_out (setting open)", got, v.Settings.State)
	}
	v.Settings.State = queue.Closed
	if got := v.RoomState(c.t); got != "closed" {
		t.Errorf("closed room with 0 units tells %s, want closed", got)
	}
	if got := new(queue.View).RoomState(c.t); got != "" {
		t.Errorf("zero view's state = %q, want its setting (empty): unknown inventory is not sold out", got)
	}
}

func TestInventoryCap(t *testing.T) {
	s := queue.DefaultSettings()
	s.MaxActive, s.VisitorsPerUnit = 1000, 2
	for _, tt := range []struct {
		inv  queue.Inventory
		per  float64
		want int64
	}{
		{queue.Inventory{}, 2, 1000},
		{queue.Inventory{Units: 0, Known: true}, 2, 0},
		{queue.Inventory{Units: 0, Known: true}, 0, 0},
		{queue.Inventory{Units: 100, Known: true}, 2, 200},
		{queue.Inventory{Units: 3, Known: true}, 1.5, 5},
		{queue.Inventory{Units: 3, Known: true}, 0, 1000},
		{queue.Inventory{Units: 900, Known: true}, 2, 1000},
	} {
		s.VisitorsPerUnit = tt.per
		if got := queue.InventoryCap(s, tt.inv); got != tt.want {
			t.Errorf("InventoryCap(per unit %v, %+v) = %d, want %d", tt.per, tt.inv, got, tt.want)
		}
	}
}

// TestInventoryMetrics: a room's inventory and the cap it sets are
// exported once the sale service counted them, and absent before.
func TestInventoryMetrics(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	q := queue.New(memqueue.New(), queue.Options{Metrics: queue.NewMetrics(reg)})
	s := queue.DefaultSettings()
	s.MaxActive, s.VisitorsPerUnit = 100, 2
	if err := q.PutRoom(ctx, "r", s); err != nil {
		t.Fatal(err)
	}
	gauges := func() map[string]float64 {
		t.Helper()
		if err := refresh(ctx, q); err != nil {
			t.Fatal(err)
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if g := m.GetGauge(); g != nil && strings.HasPrefix(mf.GetName(), "usher_inventory") {
					got[mf.GetName()] = g.GetValue()
				}
			}
		}
		return got
	}
	if got := gauges(); len(got) != 0 {
		t.Errorf("inventory gauges of a room without a sale = %v, want none", got)
	}
	for _, tt := range []struct {
		units int64
		want  map[string]float64
	}{
		{30, map[string]float64{"usher_inventory_units": 30, "usher_inventory_cap": 60}},
		{500, map[string]float64{"usher_inventory_units": 500, "usher_inventory_cap": 100}},
		{0, map[string]float64{"usher_inventory_units": 0, "usher_inventory_cap": 0}},
	} {
		if err := q.SetInventory(ctx, "r", tt.units); err != nil {
			t.Fatal(err)
		}
		if got := gauges(); !cmp.Equal(got, tt.want) {
			t.Errorf("with %d units left: gauges %v, want %v", tt.units, got, tt.want)
		}
	}
}
