package redisqueue_test

import (
	"context"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"slices"
	"testing"
	"time"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
)

// TestMatchesMemqueueFeatures is TestMatchesMemqueue with the admission
// features: presence (parking, coming back, the grace), max_waiting, the
// inventory cap, the adaptive rate in force, DeleteRoom, and the step's
// Skipped and Abandoned counts. The opening draw is left to the
// conformance suite: the stores' seeds differ, and so do their orders.
// Everything must agree.
func TestMatchesMemqueueFeatures(t *testing.T) {
	c := openClient(t)
	ctx := context.Background()
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			redis := newStoreFunc(c)(t)
			mem := memqueue.New()
			rnd := mathrand.New(mathrand.NewPCG(seed, 2))
			pick := func(xs ...int64) int64 { return xs[rnd.IntN(len(xs))] }
			now := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
			rooms := []string{"a", "b"}
			putPaused(t, rooms, redis, mem)
			var log []string
			for i := range 3000 {
				switch d := rnd.IntN(20); {
				case d < 8:
					now = now.Add(time.Duration(rnd.IntN(16)) * 125 * time.Millisecond)
				}
				room := rooms[rnd.IntN(2)]
				visitor := fmt.Sprintf("v%d", rnd.IntN(60))
				var op string
				var got, want any
				switch r := rnd.IntN(100); {
				case r < 3:
					set := queue.DefaultSettings()
					set.State = []queue.RoomState{queue.Open, queue.Open, queue.Open, queue.Paused}[rnd.IntN(4)]
					set.MaxActive = pick(3, 8, 20)
					set.AdmitRate = float64(pick(2, 4, 16))
					set.Interval = time.Duration(pick(250, 1000)) * time.Millisecond
					set.ActiveTTL = time.Duration(pick(8, 20)) * time.Second
					set.ClaimWindow = time.Duration(pick(2, 4)) * time.Second
					set.PresenceTimeout = time.Duration(pick(0, 5, 8)) * time.Second
					set.MaxWaiting = pick(0, 10, 30)
					set.VisitorsPerUnit = []float64{0, 0.5, 2}[rnd.IntN(3)]
					if rnd.IntN(2) == 0 {
						set.Admission = queue.Adaptive
						set.MinAdmitRate, set.MaxAdmitRate = 1, 40
					}
					op = fmt.Sprintf("PutRoom(%s, %+v)", room, set)
					got, want = errKind(put(redis, room, set)), errKind(put(mem, room, set))
				case r < 4:
					force := rnd.IntN(2) == 0
					op = fmt.Sprintf("DeleteRoom(%s, %v)", room, force)
					got, want = errKind(redis.DeleteRoom(ctx, room, force, now)), errKind(mem.DeleteRoom(ctx, room, force, now))
				case r < 5:
					u := pick(0, 1, 3, 10, 100)
					op = fmt.Sprintf("SetInventory(%s, %d)", room, u)
					got, want = errKind(redis.SetInventory(ctx, room, u)), errKind(mem.SetInventory(ctx, room, u))
				case r < 7:
					st1, _ := redis.Stats(ctx, room, now)
					st2, _ := mem.Stats(ctx, room, now)
					rate := []float64{1, 3, 30, 100}[rnd.IntN(4)]
					n1 := st1.Control
					n1.Version++
					n1.Rate = rate
					n2 := st2.Control
					n2.Version++
					n2.Rate = rate
					op = fmt.Sprintf("SetControl(%s, %v)", room, rate)
					ok1, e1 := redis.(queue.ControlStore).SetControl(ctx, room, n1, queue.Signals{})
					ok2, e2 := mem.SetControl(ctx, room, n2, queue.Signals{})
					got, want = fmt.Sprint(ok1, errKind(e1)), fmt.Sprint(ok2, errKind(e2))
				case r < 45:
					op = fmt.Sprintf("Enter(%s, %s)", room, visitor)
					e1, c1, err1 := redis.Enter(ctx, room, visitor, now, queue.EnterOptions{})
					e2, c2, err2 := mem.Enter(ctx, room, visitor, now, queue.EnterOptions{})
					if !sameEntry(e1, e2) || c1 != c2 || errKind(err1) != errKind(err2) {
						got, want = fmt.Sprint(e1, c1, errKind(err1)), fmt.Sprint(e2, c2, errKind(err2))
					}
				case r < 70:
					if rnd.IntN(3) == 0 { // a visitor who went away stays away
						continue
					}
					op = fmt.Sprintf("Status(%s, %s)", room, visitor)
					e1, err1 := redis.Status(ctx, room, visitor, now)
					e2, err2 := mem.Status(ctx, room, visitor, now)
					if !sameEntry(e1, e2) || errKind(err1) != errKind(err2) {
						got, want = fmt.Sprint(e1, errKind(err1)), fmt.Sprint(e2, errKind(err2))
					}
				case r < 75:
					op = fmt.Sprintf("Leave(%s, %s)", room, visitor)
					got, want = errKind(redis.Leave(ctx, room, visitor)), errKind(mem.Leave(ctx, room, visitor))
				case r < 94:
					op = fmt.Sprintf("Admit(%s)", room)
					sb, _ := mem.Stats(ctx, room, now)
					rb, _ := redis.Stats(ctx, room, now)
					r1, err1 := redis.Admit(ctx, room, now)
					r2, err2 := mem.Admit(ctx, room, now)
					if !slices.Equal(r1.Admitted, r2.Admitted) || r1.Expired != r2.Expired || r1.Skipped != r2.Skipped ||
						r1.Abandoned != r2.Abandoned || errKind(err1) != errKind(err2) {
						got, want = fmt.Sprint(r1, errKind(err1)), fmt.Sprint(r2, errKind(err2))
					}
					if c := max(0, queue.InventoryCap(sb.Settings, sb.Inventory)-sb.Active); int64(len(r2.Admitted)) > c {
						t.Errorf("op %d mem admitted %d > room %d", i, len(r2.Admitted), c)
					}
					if c := max(0, queue.InventoryCap(rb.Settings, rb.Inventory)-rb.Active); int64(len(r1.Admitted)) > c {
						t.Errorf("op %d redis admitted %d > room %d", i, len(r1.Admitted), c)
					}
				default:
					op = fmt.Sprintf("Stats(%s)", room)
					s1, err1 := redis.Stats(ctx, room, now)
					s2, err2 := mem.Stats(ctx, room, now)
					got, want = fmt.Sprint(s1, errKind(err1)), fmt.Sprint(s2, errKind(err2))
				}
				log = append(log, fmt.Sprintf("%d +%v %s", i, now.Sub(time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)), op))
				if got != want {
					for _, l := range log[max(0, len(log)-400):] {
						t.Log(l)
					}
					t.Fatalf("op %d at +%v: %s = %v, memqueue says %v", i, now.Sub(time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)), op, got, want)
				}
			}
		})
	}
}

// putPaused creates rooms, paused with the default settings, in every store.
func putPaused(t *testing.T, rooms []string, stores ...queue.Store) {
	t.Helper()
	set := queue.DefaultSettings()
	set.State = queue.Paused
	for _, room := range rooms {
		for _, s := range stores {
			if _, err := s.PutRoom(context.Background(), room, set, queue.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// errKind names an error by the queue error it wraps, for comparing
// stores.
func errKind(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, queue.ErrRoomNotFound):
		return "not found"
	case errors.Is(err, queue.ErrRoomClosed):
		return "closed"
	case errors.Is(err, queue.ErrQueueFull):
		return "full"
	case errors.Is(err, queue.ErrRoomInUse):
		return "in use"
	case errors.Is(err, queue.ErrInvalid):
		return "invalid"
	}
	return err.Error()
}

// sameEntry reports whether two stores gave the same entry.
func sameEntry(a, b queue.Entry) bool {
	return a.Visitor == b.Visitor && a.Status == b.Status && a.Seq == b.Seq &&
		a.Position == b.Position && a.ExpiresAt.Equal(b.ExpiresAt)
}

// put is PutRoom replacing the room's settings, for errKind.
func put(s queue.Store, room string, set queue.Settings) error {
	_, err := s.PutRoom(context.Background(), room, set, queue.PutOptions{})
	return err
}
