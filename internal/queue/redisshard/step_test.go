package redisshard_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/queue"
	"usher/internal/queue/redisshard"
)

// The tests of this file put a visitor's call between two phases of an
// admission step (export_test.go's Step) and check that the step's end
// does not undo it. Rooms of two shards, a batch of one (each step takes
// the head of the line), a slot of one second, on a fake clock.

const stepRoom = "step"

func stepSettings(strategy redisshard.Strategy) redisshard.Settings {
	return redisshard.Settings{Shards: 2, Strategy: strategy, MaxActive: 10, AdmitRate: 10,
		Interval: 100 * time.Millisecond, ActiveTTL: time.Second, ClaimWindow: time.Second}
}

// stepRoomWith creates the room with set and enters v0…v4 a millisecond
// apart from t0.
func stepRoomWith(t *testing.T, s *redisshard.Store, set redisshard.Settings, t0 time.Time) {
	t.Helper()
	ctx := context.Background()
	if err := s.PutRoom(ctx, stepRoom, set); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, _, err := s.Enter(ctx, stepRoom, fmt.Sprintf("v%d", i), t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
}

// takeOne runs a step's reserve, peek and pop at now, and returns it and
// the one visitor it took.
func takeOne(t *testing.T, s *redisshard.Store, now time.Time) (*redisshard.Step, string) {
	t.Helper()
	p, err := s.TakeStep(context.Background(), stepRoom, now)
	if err != nil || len(p.Taken()) != 1 {
		t.Fatalf("step took %v (%v); want one visitor", p.Taken(), err)
	}
	return p, p.Taken()[0]
}

// commitOne is takeOne, then the step's commit, which must admit the one
// visitor it took.
func commitOne(t *testing.T, s *redisshard.Store, now time.Time) (*redisshard.Step, string) {
	t.Helper()
	p, v := takeOne(t, s, now)
	if res, err := p.Commit(context.Background()); err != nil || !slices.Equal(res.Admitted, []string{v}) {
		t.Fatalf("commit = %+v, %v; want %s admitted", res, err, v)
	}
	return p, v
}

// TestEnterDuringStep: a step pops v; v enters again (a page reload)
// before the step commits; the step commits and acknowledges. v must not
// get a new place: Enter answers waiting at 1 (being admitted), and after
// the acknowledgement v is active, out of the line, and never admitted
// again by a later step once its slot lapses.
func TestEnterDuringStep(t *testing.T) {
	backends(t, func(t *testing.T, c rueidis.Client, s *redisshard.Store) {
		for _, strategy := range lines {
			t.Run(string(strategy), func(t *testing.T) {
				ctx := context.Background()
				s := redisshard.New(c, s.Prefix()+string(strategy)+":", 0)
				t0 := time.UnixMilli(1_800_000_000_000)
				stepRoomWith(t, s, stepSettings(strategy), t0)
				now := t0.Add(10 * time.Millisecond)
				p, v := takeOne(t, s, now)

				e, created, err := s.Enter(ctx, stepRoom, v, now)
				if err != nil || created || e.Status != queue.Waiting || e.Position != 1 {
					t.Errorf("Enter(%s) while a step holds it = %+v, created %v, %v; want waiting at 1, not created", v, e, created, err)
				}
				if _, err := p.Finish(ctx); err != nil {
					t.Fatal(err)
				}
				if e, err := s.Status(ctx, stepRoom, v, now); err != nil || e.Status != queue.Active {
					t.Errorf("Status(%s) after the step admitted it = %+v, %v; want active", v, e, err)
				}
				if e, created, err := s.Enter(ctx, stepRoom, v, now); err != nil || created || e.Status != queue.Active {
					t.Errorf("Enter(%s) after the step admitted it = %+v, created %v, %v; want active", v, e, created, err)
				}
				if n, err := s.Waiting(ctx, stepRoom, 2); err != nil || n != 4 {
					t.Errorf("Waiting = %d, %v; want the 4 not admitted", n, err)
				}
				// Its slot lapses after a second; later steps admit the rest, never v.
				for i := 1; i <= 40; i++ {
					res, err := s.Admit(ctx, stepRoom, now.Add(time.Duration(i)*250*time.Millisecond))
					if err != nil {
						t.Fatal(err)
					}
					if slices.Contains(res.Admitted, v) || res.Dropped > 0 {
						t.Errorf("step %d = %+v: %s, admitted before, taken again", i, res, v)
					}
				}
			})
		}
	})
}

// TestLeaveBeforeAck: a step commits v; v leaves (its slot is freed);
// then the step acknowledges. The acknowledgement must not note v in its
// shard's copy of the admitted: v, without a slot, is gone, and its next
// Enter gives it a place in line.
func TestLeaveBeforeAck(t *testing.T) {
	backends(t, func(t *testing.T, c rueidis.Client, s *redisshard.Store) {
		ctx := context.Background()
		t0 := time.UnixMilli(1_800_000_000_000)
		stepRoomWith(t, s, stepSettings(redisshard.Timestamp), t0)
		now := t0.Add(10 * time.Millisecond)
		p, v := commitOne(t, s, now)
		if err := s.Leave(ctx, stepRoom, v); err != nil {
			t.Fatal(err)
		}
		if err := p.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		if e, err := s.Status(ctx, stepRoom, v, now); err != nil || e.Status != queue.Gone {
			t.Errorf("Status(%s) after it left = %+v, %v; want gone", v, e, err)
		}
		if e, created, err := s.Enter(ctx, stepRoom, v, now); err != nil || !created || e.Status != queue.Waiting {
			t.Errorf("Enter(%s) after it left = %+v, created %v, %v; want a new place in line", v, e, created, err)
		}
	})
}

// TestLeaveBeforeCompensation: a step pops v; v leaves; the room is
// paused, so the commit admits nobody and the acknowledgement puts back
// what the step took. v, who left, must stay out of the line.
func TestLeaveBeforeCompensation(t *testing.T) {
	backends(t, func(t *testing.T, c rueidis.Client, s *redisshard.Store) {
		ctx := context.Background()
		t0 := time.UnixMilli(1_800_000_000_000)
		stepRoomWith(t, s, stepSettings(redisshard.Counter), t0)
		now := t0.Add(10 * time.Millisecond)
		p, v := takeOne(t, s, now)
		if err := s.Leave(ctx, stepRoom, v); err != nil {
			t.Fatal(err)
		}
		if err := c.Do(ctx, c.B().Hset().Key(s.HomeMetaKey(stepRoom)).FieldValue().FieldValue("state", "paused").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if res, err := p.Finish(ctx); err != nil || res.Returned != 1 {
			t.Fatalf("step = %+v, %v; want its visitor returned (the room is paused)", res, err)
		}
		if e, err := s.Status(ctx, stepRoom, v, now); err != nil || e.Status != queue.Gone {
			t.Errorf("Status(%s) after it left = %+v, %v; want gone", v, e, err)
		}
		if n, err := s.Waiting(ctx, stepRoom, 2); err != nil || n != 4 {
			t.Errorf("Waiting = %d, %v; want the 4 who stayed", n, err)
		}
	})
}

// TestFinishAfterDeadline: the caller's context ends after a step took
// its visitors (a request deadline, a scheduler shutting down). The
// commit and the acknowledgements still run: the visitor is admitted and
// out of the line at once, not left to the lease.
func TestFinishAfterDeadline(t *testing.T) {
	backends(t, func(t *testing.T, c rueidis.Client, s *redisshard.Store) {
		ctx, cancel := context.WithCancel(context.Background())
		t0 := time.UnixMilli(1_800_000_000_000)
		stepRoomWith(t, s, stepSettings(redisshard.Timestamp), t0)
		now := t0.Add(10 * time.Millisecond)
		p, v := takeOne(t, s, now)
		cancel()
		if res, err := p.Finish(ctx); err != nil || !slices.Equal(res.Admitted, []string{v}) {
			t.Errorf("step finished after its context ended = %+v, %v; want %s admitted", res, err, v)
		}
		bg := context.Background()
		if e, err := s.Status(bg, stepRoom, v, now); err != nil || e.Status != queue.Active {
			t.Errorf("Status(%s) = %+v, %v; want active", v, e, err)
		}
		if n, err := s.Waiting(bg, stepRoom, 2); err != nil || n != 4 {
			t.Errorf("Waiting = %d, %v; want 4", n, err)
		}
	})
}

// TestLostRoom: Redis loses the room's keys (a flush, a failover to an
// empty replica) while a store remembers the room's layout. Its Enter
// must answer not found and write nothing (no home hash made of
// counters), and the room can then be created again.
func TestLostRoom(t *testing.T) {
	backends(t, func(t *testing.T, c rueidis.Client, s *redisshard.Store) {
		for _, strategy := range redisshard.Strategies {
			t.Run(string(strategy), func(t *testing.T) {
				ctx := context.Background()
				s := redisshard.New(c, s.Prefix()+string(strategy)+":", 0)
				t0 := time.UnixMilli(1_800_000_000_000)
				set := stepSettings(strategy)
				set.Shards = 3
				if err := s.PutRoom(ctx, stepRoom, set); err != nil {
					t.Fatal(err)
				}
				if _, _, err := s.Enter(ctx, stepRoom, "a", t0); err != nil {
					t.Fatal(err)
				}
				keys := s.Keys(stepRoom, 3)
				for _, k := range keys {
					if err := c.Do(ctx, c.B().Del().Key(k).Build()).Error(); err != nil {
						t.Fatal(err)
					}
				}
				for i := range 6 { // visitors of every shard
					v := fmt.Sprintf("x%d", i)
					if _, _, err := s.Enter(ctx, stepRoom, v, t0); !errors.Is(err, queue.ErrRoomNotFound) {
						t.Errorf("Enter(%s) into the lost room: %v; want not found", v, err)
					}
				}
				for _, k := range keys {
					if n, err := c.Do(ctx, c.B().Exists().Key(k).Build()).AsInt64(); err != nil || n != 0 {
						t.Errorf("%s exists after Enter into the lost room (%v)", k, err)
					}
				}
				if err := s.PutRoom(ctx, stepRoom, set); err != nil {
					t.Fatalf("PutRoom of the lost room: %v", err)
				}
				if e, created, err := s.Enter(ctx, stepRoom, "b", t0); err != nil || !created || e.Status != queue.Waiting {
					t.Errorf("Enter into the room made again = %+v, %v, %v; want waiting", e, created, err)
				}
			})
		}
	})
}

// TestLineStateVersions: two updates of a room whose copies of the state
// cross on a line shard (the later update's copy lands first) leave the
// later state there, and SyncLines writes a copy that is missing (a line
// shard whose primary failed over to an empty replica).
func TestLineStateVersions(t *testing.T) {
	backends(t, func(t *testing.T, c rueidis.Client, s *redisshard.Store) {
		ctx := context.Background()
		t0 := time.UnixMilli(1_800_000_000_000)
		set := stepSettings(redisshard.Timestamp)
		if err := s.PutRoom(ctx, stepRoom, set); err != nil {
			t.Fatal(err)
		}
		made, err := s.Settings(ctx, stepRoom) // with the tags PutRoom chose
		if err != nil {
			t.Fatal(err)
		}
		var v string // a visitor of shard 1
		for n := 0; redisshard.ShardOf(v, 2) != 1; n++ {
			v = fmt.Sprintf("x%d", n)
		}
		if err := s.SetLineState(ctx, stepRoom, 2, set.Strategy, made.Tags, "closed", "1900000000000002"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetLineState(ctx, stepRoom, 2, set.Strategy, made.Tags, "open", "1900000000000001"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Enter(ctx, stepRoom, v, t0); !errors.Is(err, queue.ErrRoomClosed) {
			t.Errorf("Enter after the older copy came last: %v; want closed", err)
		}
		if err := c.Do(ctx, c.B().Del().Key(s.ShardMetaKey(stepRoom, 1)).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Enter(ctx, stepRoom, v, t0); !errors.Is(err, queue.ErrRoomNotFound) {
			t.Errorf("Enter on a shard without its copy: %v; want not found", err)
		}
		if n, err := s.SyncLines(ctx, stepRoom, 2, set.Strategy, made.Tags, "open", "1900000000000003"); err != nil || n != 0 {
			t.Fatalf("SyncLines = %d, %v; want 0 waiting", n, err)
		}
		if e, created, err := s.Enter(ctx, stepRoom, v, t0); err != nil || !created || e.Status != queue.Waiting {
			t.Errorf("Enter after SyncLines = %+v, %v, %v; want a new place", e, created, err)
		}
	})
}

// TestEnterAfterDuplicateDropped: a step commits v and its ack never
// lands (the ack timeout, a shard blip). After the lease the next step's
// pop reclaims v (back at the head of the line), takes it again, and its
// commit drops v as already active. v holds a slot: its Status and Enter
// (a reload) must answer active, and the Enter must not give it a place
// at the back of the line. The ack used to note only the visitors its
// commit admitted, so v was nowhere on its shard and Enter made a place.
func TestEnterAfterDuplicateDropped(t *testing.T) {
	backends(t, func(t *testing.T, c rueidis.Client, s *redisshard.Store) {
		ctx := context.Background()
		t0 := time.UnixMilli(1_800_000_000_000)
		set := stepSettings(redisshard.Timestamp)
		set.ActiveTTL = time.Minute
		stepRoomWith(t, s, set, t0)
		now := t0.Add(10 * time.Millisecond)
		_, v := commitOne(t, s, now)
		// No ack. After the lease (5 s), a step takes v again and drops it.
		at := now.Add(6 * time.Second)
		res, err := s.Admit(ctx, stepRoom, at)
		if err != nil || res.Dropped != 1 || slices.Contains(res.Admitted, v) {
			t.Fatalf("step after the lease = %+v, %v; want %s dropped as already active", res, err, v)
		}
		at = at.Add(time.Second)
		if e, err := s.Status(ctx, stepRoom, v, at); err != nil || e.Status != queue.Active {
			t.Errorf("Status(%s) = %+v, %v; want active", v, e, err)
		}
		e, created, err := s.Enter(ctx, stepRoom, v, at)
		if err != nil || created || e.Status != queue.Active || !e.ExpiresAt.Equal(now.Add(time.Minute)) {
			t.Errorf("Enter(%s) of an active visitor = %+v, created %v, %v; want active until %v, not created",
				v, e, created, err, now.Add(time.Minute).UTC())
		}
		if e, err := s.Status(ctx, stepRoom, v, at); err != nil || e.Status != queue.Active {
			t.Errorf("Status(%s) after its Enter = %+v, %v; want active", v, e, err)
		}
	})
}

// TestActiveWhileAckLost: a step commits v and its ack never lands (the
// ack timeout, a shard blip), so v stays in the step's record on its
// shard. The room then admits nobody: it is full (max_active 1, v holds
// the slot) or paused, so every later reserve answers 0 and no peek or
// pop runs to reclaim the record. For the whole of v's slot its Status
// and Enter (a reload) must answer active, with the slot's end: they used
// to say waiting at 1, the shard's answer for a visitor in a step's
// record, without asking the home shard's active set.
//
// (When the slot lapses and a step runs again, it reclaims v and admits
// it a second time, from its old place: a documented limit.)
func TestActiveWhileAckLost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after func(ctx context.Context, c rueidis.Client, s *redisshard.Store) error
	}{
		{"full", nil},
		{"paused", func(ctx context.Context, c rueidis.Client, s *redisshard.Store) error {
			return c.Do(ctx, c.B().Hset().Key(s.HomeMetaKey(stepRoom)).FieldValue().FieldValue("state", "paused").Build()).Error()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backends(t, func(t *testing.T, c rueidis.Client, s *redisshard.Store) {
				ctx := context.Background()
				t0 := time.UnixMilli(1_800_000_000_000)
				set := stepSettings(redisshard.Timestamp)
				set.MaxActive = 1
				set.ActiveTTL = time.Minute
				stepRoomWith(t, s, set, t0)
				now := t0.Add(10 * time.Millisecond)
				_, v := commitOne(t, s, now)
				// No ack.
				if tc.after != nil {
					if err := tc.after(ctx, c, s); err != nil {
						t.Fatal(err)
					}
				}
				until := now.Add(time.Minute)
				for _, d := range []time.Duration{0, 6 * time.Second, 30 * time.Second, 59 * time.Second} {
					at := now.Add(d)
					if res, err := s.Admit(ctx, stepRoom, at); err != nil || res.Reserved != 0 {
						t.Fatalf("+%v step = %+v, %v; want nothing reserved (the room admits nobody)", d, res, err)
					}
					if e, err := s.Status(ctx, stepRoom, v, at); err != nil || e.Status != queue.Active || !e.ExpiresAt.Equal(until) {
						t.Errorf("+%v Status(%s) = %+v, %v; want active until %v", d, v, e, err, until.UTC())
					}
					e, created, err := s.Enter(ctx, stepRoom, v, at)
					if err != nil || created || e.Status != queue.Active || !e.ExpiresAt.Equal(until) {
						t.Errorf("+%v Enter(%s) = %+v, created %v, %v; want active until %v", d, v, e, created, err, until.UTC())
					}
				}
				// Once the slot lapses, v is in the step's record still: waiting at 1.
				at := until.Add(time.Millisecond)
				if e, err := s.Status(ctx, stepRoom, v, at); err != nil || e.Status != queue.Waiting || e.Position != 1 {
					t.Errorf("Status(%s) after its slot lapsed = %+v, %v; want waiting at 1 (in the step's record)", v, e, err)
				}
			})
		})
	}
}
