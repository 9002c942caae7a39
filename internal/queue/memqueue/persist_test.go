package memqueue_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/queue/queuetest"
)

// A store opened on a file passes the suite too.
func TestConformanceWithFile(t *testing.T) {
	queuetest.Run(t, func(t testing.TB) queue.Store {
		s, err := memqueue.Open(filepath.Join(t.TempDir(), "rooms.json"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// Rooms, their settings and their draws survive a restart; queues do not.
func TestRoomsSurviveRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rooms.json")
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s, err := memqueue.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tuned := queue.DefaultSettings()
	tuned.MaxActive, tuned.AdmitRate, tuned.PowBits, tuned.State = 7, 3.5, 12, queue.Paused
	drawn := queue.DefaultSettings()
	drawn.OpensAt = t0.Add(time.Minute)
	pending := queue.DefaultSettings()
	pending.OpensAt = t0.Add(time.Hour)
	for room, set := range map[string]queue.Settings{"tuned": tuned, "drawn": drawn, "pending": pending} {
		if _, err := s.PutRoom(ctx, room, set, queue.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{"a", "b", "c"} {
		for _, room := range []string{"drawn", "pending"} {
			if _, _, err := s.Enter(ctx, room, v, t0, queue.EnterOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.Admit(ctx, "drawn", drawn.OpensAt); err != nil { // draws
		t.Fatal(err)
	}
	before := map[string]queue.Stats{}
	for _, room := range []string{"tuned", "drawn", "pending"} {
		before[room], _ = s.Stats(ctx, room, t0)
	}

	s, err = memqueue.Open(path) // the restart
	if err != nil {
		t.Fatal(err)
	}
	if rooms, _ := s.Rooms(ctx); !slices.Equal(rooms, []string{"drawn", "pending", "tuned"}) {
		t.Fatalf("rooms after a restart = %v", rooms)
	}
	for room, old := range before {
		st, err := s.Stats(ctx, room, t0)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(st.Settings, old.Settings) {
			t.Errorf("%s: settings after a restart = %+v, want %+v", room, st.Settings, old.Settings)
		}
		wantDraw := old.Draw
		if !wantDraw.Done {
			wantDraw.Entrants = 0 // the pre-queue itself is not kept
		}
		if !reflect.DeepEqual(st.Draw, wantDraw) {
			t.Errorf("%s: draw after a restart = %+v, want %+v", room, st.Draw, wantDraw)
		}
		if st.Waiting != 0 {
			t.Errorf("%s: %d waiting after a restart, want 0 (queues are not kept)", room, st.Waiting)
		}
	}
	if d := before["drawn"].Draw; !d.Done || d.Entrants != 3 {
		t.Errorf("draw before the restart = %+v, want done with 3 entrants", d)
	}
}

func TestOpenRefusesBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rooms.json")
	for _, body := range []string{`{`, `{"rooms":{"r":{"settings":{"max_active":"0"}}}}`, `{"rooms":{"r":{"settings":{},"draw_seed":"abcd"}}}`} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := memqueue.Open(path); err == nil {
			t.Errorf("Open of %s: no error", body)
		}
	}
}

// A rooms file that cannot be written: the change is refused with
// ErrUnavailable and nothing changes, in memory or in the file.
func TestUnwritableRoomsFile(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := memqueue.Open(filepath.Join(dir, "rooms.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutRoom(ctx, "r", queue.DefaultSettings(), queue.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil { // no file can be written there now
		t.Fatal(err)
	}
	set := queue.DefaultSettings()
	set.OpensAt, set.MaxActive = time.Now().Add(time.Hour).Truncate(time.Millisecond), 7
	if _, err := s.PutRoom(ctx, "r", set, queue.PutOptions{}); !errors.Is(err, queue.ErrUnavailable) {
		t.Fatalf("PutRoom with an unwritable file: %v, want ErrUnavailable", err)
	}
	st, err := s.Stats(ctx, "r", time.Now())
	if err != nil || st.Settings.MaxActive != queue.DefaultSettings().MaxActive || st.Draw.Seed != nil {
		t.Errorf("room after a refused PutRoom = %+v, %v; want it unchanged", st, err)
	}
	if _, _, err := s.Enter(ctx, "r", "v", time.Now(), queue.EnterOptions{}); err != nil {
		t.Fatal(err)
	}
	if e, _ := s.Status(ctx, "r", "v", time.Now()); e.Status != queue.Active {
		t.Errorf("entry after a refused PutRoom = %+v, want passthrough (no pre-queue)", e)
	}
	for _, create := range []func() error{
		func() error { _, err := s.PutRoom(ctx, "new", set, queue.PutOptions{}); return err },
		func() error { _, err := s.PutRoom(ctx, "new", set, queue.PutOptions{OnlyCreate: true}); return err },
	} {
		if err := create(); !errors.Is(err, queue.ErrUnavailable) {
			t.Errorf("creating a room with an unwritable file: %v, want ErrUnavailable", err)
		}
	}
	if rooms, _ := s.Rooms(ctx); !slices.Equal(rooms, []string{"r"}) {
		t.Errorf("rooms = %v, want only r", rooms)
	}
}

// After a restart, a pre-queue ticket issued before it gets the exact
// answer (the store lost the place), not the view's "pre-queue": the
// visitor enters again, and keeps its draw key.
func TestRestartedPreQueueTicketIsExact(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rooms.json")
	s, err := memqueue.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	set := queue.DefaultSettings()
	set.OpensAt = time.Now().Add(time.Hour).Truncate(time.Millisecond)
	q := queue.New(s, queue.Options{})
	if err := q.PutRoom(ctx, "r", set); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.Enter(ctx, "r", "v"); err != nil {
		t.Fatal(err)
	}
	issued := time.Now().Add(-time.Second)

	s, err = memqueue.Open(path) // the restart
	if err != nil {
		t.Fatal(err)
	}
	q = queue.New(s, queue.Options{})
	if err := q.PutRoom(ctx, "r", set); err != nil { // loads the view
		t.Fatal(err)
	}
	e, estimated, err := q.Status(ctx, "r", "v", queue.PreQueueSeq, issued)
	if err != nil || estimated || e.Status != queue.Gone {
		t.Errorf("Status of a ticket from before the restart = %+v, estimated %v, %v; want the exact gone", e, estimated, err)
	}
	if e, estimated, _ := q.Status(ctx, "r", "v", queue.PreQueueSeq, time.Now()); !estimated || e.Status != queue.Waiting {
		t.Errorf("Status of a ticket from after the restart = %+v, estimated %v; want the view's pre-queue answer", e, estimated)
	}
}

// A deleted room leaves the rooms file: it does not come back at restart.
func TestDeletedRoomStaysDeleted(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rooms.json")
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s, err := memqueue.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, room := range []string{"gone", "kept"} {
		if _, err := s.PutRoom(ctx, room, queue.DefaultSettings(), queue.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteRoom(ctx, "gone", false, t0); err != nil {
		t.Fatal(err)
	}
	again, err := memqueue.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := again.Rooms(ctx); !slices.Equal(got, []string{"kept"}) {
		t.Errorf("rooms after restart = %v, want [kept]", got)
	}
}
