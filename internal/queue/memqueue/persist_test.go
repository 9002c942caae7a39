package memqueue_test

import (
	"context"
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
		if err := s.PutRoom(ctx, room, set); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{"a", "b", "c"} {
		for _, room := range []string{"drawn", "pending"} {
			if _, _, err := s.Enter(ctx, room, v, t0); err != nil {
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
