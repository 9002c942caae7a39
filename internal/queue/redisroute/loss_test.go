package redisroute_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/queue"
	"usher/internal/queue/redisroute"
	"usher/internal/queue/redisshard"
	"usher/internal/testenv"
)

// visitorOf returns a visitor id whose shard of k is i.
func visitorOf(i, k int) string {
	for n := 0; ; n++ {
		if v := fmt.Sprintf("x%d", n); redisshard.ShardOf(v, k) == i {
			return v
		}
	}
}

// lostRoomSettings are a sharded room's settings: three shards, timestamp.
func lostRoomSettings(t *testing.T) queue.Settings {
	t.Helper()
	set := queue.DefaultSettings()
	set.Shards, set.ShardStrategy = 3, queue.ShardTimestamp
	set.PresenceTimeout, set.VisitorsPerUnit, set.ClaimWindow = 0, 0, set.ActiveTTL
	if err := set.Validate(); err != nil {
		t.Fatal(err)
	}
	return set
}

// lostRoom makes room "hot" of lostRoomSettings (with strategy) through
// a new store s, which learns its layout from an Enter, then loses every
// key of the test's prefix (a flush, a failover to an empty replica).
func lostRoom(t *testing.T, strategy queue.ShardStrategy) (rueidis.Client, string, *redisroute.Router, queue.Settings, time.Time) {
	t.Helper()
	c := testenv.Redis(t)
	prefix := testenv.RedisPrefix(t, c)
	s := redisroute.New(c, prefix)
	set := lostRoomSettings(t)
	set.ShardStrategy = strategy
	if _, err := s.PutRoom(context.Background(), "hot", set, queue.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_900_000_000_000)
	if _, _, err := s.Enter(context.Background(), "hot", "a", now, queue.EnterOptions{}); err != nil { // s learns the layout
		t.Fatal(err)
	}
	testenv.DeleteKeys(t, c, prefix) // the data is lost
	return c, prefix, s, set, now
}

// movedVisitor is a visitor whose shard of 5 is not its shard of 3.
func movedVisitor() string {
	for n := 0; ; n++ {
		if v := fmt.Sprintf("m%d", n); redisshard.ShardOf(v, 5) != redisshard.ShardOf(v, 3) {
			return v
		}
	}
}

// TestShardedRoomMadeAgainUnsharded: an instance that knew a room as
// sharded learns from its next stats refresh that the room, lost and made
// again by another instance, has one line now: its Enter goes to that line
// (it used to go to a shard's line, with a timestamp score, where the other
// instance found a head sequence number of 10^15 and the visitor gone).
func TestShardedRoomMadeAgainUnsharded(t *testing.T) {
	c, prefix, stale, set, now := lostRoom(t, queue.ShardTimestamp)
	fresh := redisroute.New(c, prefix)
	ctx := context.Background()
	set.Shards = 1
	if _, err := fresh.PutRoom(ctx, "hot", set, queue.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, err := stale.Stats(ctx, "hot", now); err != nil || st.Settings.Shards != 1 {
		t.Fatalf("stale instance's Stats = %+v, %v; want one shard", st, err)
	}
	v := visitorOf(0, 3)
	if _, _, err := stale.Enter(ctx, "hot", v, now, queue.EnterOptions{}); err != nil {
		t.Fatal(err)
	}
	e, err := fresh.Status(ctx, "hot", v, now)
	st, err2 := fresh.Stats(ctx, "hot", now)
	if err != nil || err2 != nil || e.Status == queue.Gone || st.LastSeq != 1 || st.HeadSeq > st.LastSeq+1 {
		t.Errorf("after the stale instance's Enter: Status %+v (%v), Stats seq %d–%d (%v); want the visitor as sequence number 1 of the one line",
			e, err, st.HeadSeq, st.LastSeq, err2)
	}
}

// TestShardedLostRoom: Redis loses a sharded room's keys (a flush, a
// failover to an empty replica) while an instance remembers that the room
// is sharded. Its calls must answer not found and write nothing (an Enter
// used to make the home hash again out of counters alone: Stats then
// failed with unavailable for good, CreateRoom said the room existed and
// PutRoom refused the layout as changed), and the room can be made again,
// through that instance or a fresh one.
func TestShardedLostRoom(t *testing.T) {
	for _, strategy := range queue.ShardStrategies {
		t.Run(string(strategy), func(t *testing.T) {
			c, prefix, s, set, now := lostRoom(t, strategy)
			ctx := context.Background()

			for i := range 3 {
				v := visitorOf(i, 3)
				if e, _, err := s.Enter(ctx, "hot", v, now, queue.EnterOptions{}); !errors.Is(err, queue.ErrRoomNotFound) {
					t.Errorf("Enter(%s, shard %d) into the lost room = %+v, %v; want not found", v, i, e, err)
				}
			}
			if n, err := c.Do(ctx, c.B().Exists().Key(prefix+"{hot}:meta").Build()).AsInt64(); err != nil || n != 0 {
				t.Errorf("the lost room's hash exists after Enter (%d, %v); want nothing written", n, err)
			}
			if _, err := s.Stats(ctx, "hot", now); !errors.Is(err, queue.ErrRoomNotFound) {
				t.Errorf("Stats of the lost room: %v; want not found", err)
			}
			if created, err := s.PutRoom(ctx, "hot", set, queue.PutOptions{OnlyCreate: true}); err != nil || !created {
				t.Fatalf("CreateRoom of the lost room = %v, %v; want created", created, err)
			}
			if e, created, err := s.Enter(ctx, "hot", "b", now, queue.EnterOptions{}); err != nil || !created || e.Status != queue.Waiting {
				t.Errorf("Enter into the room made again = %+v, %v, %v; want a new place", e, created, err)
			}
			if _, _, err := redisroute.New(c, prefix).Enter(ctx, "hot", "c", now, queue.EnterOptions{}); err != nil {
				t.Errorf("a fresh instance's Enter: %v", err)
			}
			if st, err := s.Stats(ctx, "hot", now); err != nil || st.Waiting != 2 || st.Settings.Shards != 3 {
				t.Errorf("Stats of the room made again = %+v, %v; want 3 shards, 2 waiting", st, err)
			}
		})
	}
}

// TestShardedLeftoverHash: a sharded room's hash holding only the
// counters an older instance wrote into it after Redis lost the room (seq,
// last, no settings) is no room: CreateRoom makes the room, and PutRoom
// does not refuse its layout as changed.
func TestShardedLeftoverHash(t *testing.T) {
	c := testenv.Redis(t)
	prefix := testenv.RedisPrefix(t, c)
	ctx := context.Background()
	s := redisroute.New(c, prefix)
	set := lostRoomSettings(t)
	for _, room := range []string{"created", "put"} {
		if err := c.Do(ctx, c.B().Hset().Key(prefix+"shard:{"+room+"}:meta").FieldValue().
			FieldValue("seq", "7").FieldValue("last", "1900000000000000").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if created, err := s.PutRoom(ctx, "created", set, queue.PutOptions{OnlyCreate: true}); err != nil || !created {
		t.Errorf("CreateRoom over a leftover hash = %v, %v; want created", created, err)
	}
	if _, err := s.PutRoom(ctx, "put", set, queue.PutOptions{}); err != nil {
		t.Errorf("PutRoom over a leftover hash: %v", err)
	}
	for _, room := range []string{"created", "put"} {
		if st, err := s.Stats(ctx, room, time.Now()); err != nil || st.Settings.Shards != 3 {
			t.Errorf("Stats(%s) = %+v, %v; want a room of 3 shards", room, st, err)
		}
	}
}

// TestShardedStateRepaired: a line shard's copy of the state is left
// behind (two PUTs whose copies crossed, the older one's written last; or
// a PUT that stopped between its two calls). The next Stats, which every
// instance runs to refresh its view, writes the hash's state again: the
// shard refuses newcomers of the closed room.
func TestShardedStateRepaired(t *testing.T) {
	c := testenv.Redis(t)
	prefix := testenv.RedisPrefix(t, c)
	ctx := context.Background()
	s := redisroute.New(c, prefix)
	set := lostRoomSettings(t)
	if _, err := s.PutRoom(ctx, "hot", set, queue.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// The version the open room's copies carry (none before versions).
	old, err := c.Do(ctx, c.B().Hget().Key(prefix+"{hot#1}:meta").Field("state_v").Build()).ToString()
	if rueidis.IsRedisNil(err) {
		old = "0"
	} else if err != nil {
		t.Fatal(err)
	}
	set.State = queue.Closed
	if _, err := s.PutRoom(ctx, "hot", set, queue.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// The first PUT's copy lands last on shard 1.
	if err := c.Do(ctx, c.B().Hset().Key(prefix+"{hot#1}:meta").FieldValue().
		FieldValue("state", "open").FieldValue("state_v", old).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_900_000_000_000)
	if _, err := s.Stats(ctx, "hot", now); err != nil {
		t.Fatal(err)
	}
	v := visitorOf(1, 3)
	if e, _, err := s.Enter(ctx, "hot", v, now, queue.EnterOptions{}); !errors.Is(err, queue.ErrRoomClosed) {
		t.Errorf("Enter(%s) on the repaired shard of the closed room = %+v, %v; want closed", v, e, err)
	}
}

// TestShardedRemadeWithAnotherLayout: Redis loses a sharded room of three
// shards, and the room is made again with five through the same instance,
// before any of its calls answered not found (which would have made it
// forget the layout). The instance must then use five shards: a visitor
// it enters must be where another instance looks for it (its shard of
// five), and its steps must reach shards 3 and 4. The instance used to
// keep three until a call answered not found, which in a room made again
// never comes.
func TestShardedRemadeWithAnotherLayout(t *testing.T) {
	c, prefix, s, set, now := lostRoom(t, queue.ShardTimestamp)
	ctx := context.Background()
	set.Shards = 5
	if _, err := s.PutRoom(ctx, "hot", set, queue.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	v := movedVisitor()
	if _, _, err := s.Enter(ctx, "hot", v, now, queue.EnterOptions{}); err != nil {
		t.Fatal(err)
	}
	s2 := redisroute.New(c, prefix)
	if e, err := s2.Status(ctx, "hot", v, now); err != nil || e.Status != queue.Waiting {
		t.Errorf("Status(%s) from another instance = %+v, %v; want waiting in shard %d of 5 (not %d of 3)",
			v, e, err, redisshard.ShardOf(v, 5), redisshard.ShardOf(v, 3))
	}
	w := visitorOf(4, 5)
	if _, _, err := s2.Enter(ctx, "hot", w, now, queue.EnterOptions{}); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for i := range 20 {
		r, err := s.Admit(ctx, "hot", now.Add(time.Duration(i+1)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range r.Admitted {
			got[x] = true
		}
	}
	if !got[v] || !got[w] {
		t.Errorf("s admitted %v; want %s and %s (shard 4) among them", got, v, w)
	}
}

// TestShardedRemadeElsewhere: as TestShardedRemadeWithAnotherLayout, but
// another instance makes the room again with five shards, so the first
// one's only news of it is its stats refresh (each scheduler step). After
// one Stats, the first instance must enter a visitor where the room's
// layout puts it, its shard of five.
func TestShardedRemadeElsewhere(t *testing.T) {
	c, prefix, s, set, now := lostRoom(t, queue.ShardTimestamp)
	s2 := redisroute.New(c, prefix)
	ctx := context.Background()
	set.Shards = 5
	if _, err := s2.PutRoom(ctx, "hot", set, queue.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Stats(ctx, "hot", now); err != nil || st.Settings.Shards != 5 {
		t.Fatalf("Stats = %+v, %v; want 5 shards", st, err)
	}
	v := movedVisitor()
	if _, _, err := s.Enter(ctx, "hot", v, now, queue.EnterOptions{}); err != nil {
		t.Fatal(err)
	}
	if e, err := s2.Status(ctx, "hot", v, now); err != nil || e.Status != queue.Waiting {
		t.Errorf("Status(%s) from the instance that made the room = %+v, %v; want waiting in shard %d of 5 (not %d of 3)",
			v, e, err, redisshard.ShardOf(v, 5), redisshard.ShardOf(v, 3))
	}
}
