package redisshard

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"usher/internal/queue"
)

// QueueStore is the queue.Store of rooms of several shards: their lines
// are this package's, their settings the queue's, kept in the room's home
// hash beside this package's own. What a sharded line does not have yet
// is refused by queue.Settings.Validate (presence, the draw, max_waiting,
// adaptive admission, the inventory cap) or here (SetInventory, the
// controller's calls, DeleteRoom). Entries carry no sequence number, so
// every status poll reaches the store. redisroute puts it beside the store
// of rooms of one shard.
type QueueStore struct {
	s *Store
	// taken names another store's hash of a room's slot: while it holds
	// settings, a room of one shard holds the name (nil: no check).
	taken func(room string) string
}

var _ queue.Store = (*QueueStore)(nil)

// NewQueueStore returns the queue's store over s; taken, when set, names
// another store's hash of a room's slot (redisqueue's), so that making a
// sharded room of a name that store holds fails atomically.
func NewQueueStore(s *Store, taken func(room string) string) *QueueStore {
	return &QueueStore{s: s, taken: taken}
}

// Refusals of what a sharded room has not yet.
var (
	errShardedInventory = queue.ErrInvalid.Detail("inventory: a room of several shards keeps no inventory yet")
	errShardedDelete    = queue.ErrInvalid.Detail("room: a room of several shards cannot be deleted yet")
	errShardedAdaptive  = queue.ErrInvalid.Detail("admission: adaptive admission is not sharded yet")
	errOneShard         = queue.ErrInvalid.Detail("shards: this store keeps rooms of several shards")
)

// Off names, by JSON name, the settings a room of several shards keeps
// off: its line does not have them yet (Stats.Off).
var Off = []string{"presence_timeout_seconds", "claim_window_seconds", "visitors_per_unit", "max_waiting", "admission", "opens_at", "priority_share"}

// forShards is set as a room of several shards keeps it: what its line
// does not have is off where set leaves it at its default (presence
// parking, the inventory cap), and its claim window is its active_ttl (a
// slot is held for active_ttl from admission). A value set otherwise is
// refused, naming the setting.
func forShards(set queue.Settings) (queue.Settings, error) {
	d := queue.DefaultSettings()
	if set.PresenceTimeout == d.PresenceTimeout {
		set.PresenceTimeout = 0
	}
	if set.VisitorsPerUnit == d.VisitorsPerUnit {
		set.VisitorsPerUnit = 0
	}
	set.ClaimWindow = set.ActiveTTL
	conflict := func(setting string, got any, want, why string) error {
		return queue.ErrInvalid.Detail("%s %v: a room of %d shards needs %s (%s)", setting, got, set.Shards, want, why)
	}
	switch {
	case set.PresenceTimeout != 0:
		return set, conflict("presence_timeout", set.PresenceTimeout, "0", "presence parking is not sharded yet")
	case !set.OpensAt.IsZero():
		return set, conflict("opens_at", set.OpensAt.Format(time.RFC3339Nano), "none", "the opening draw is not sharded yet")
	case set.VisitorsPerUnit != 0:
		return set, conflict("visitors_per_unit", set.VisitorsPerUnit, "0", "the inventory cap is not sharded yet")
	case set.Admission != queue.Static:
		return set, conflict("admission", set.Admission, "static", "adaptive admission is not sharded yet")
	case set.PriorityShare != 0:
		return set, conflict("priority_share", set.PriorityShare, "0", "priority lanes are not sharded yet")
	case set.MaxWaiting != 0:
		return set, conflict("max_waiting", set.MaxWaiting, "0", "the cap on the line is not sharded yet")
	}
	return set, nil
}

// PutRoom implements queue.Store: it keeps rooms of several shards only,
// with what forShards allows.
func (q *QueueStore) PutRoom(ctx context.Context, room string, set queue.Settings, po queue.PutOptions) (bool, error) {
	if !set.Sharded() {
		return false, fmt.Errorf("redisshard: put room %s: %w", room, errOneShard)
	}
	set, err := forShards(set)
	if err != nil {
		return false, err
	}
	o := putOptions{onlyCreate: po.OnlyCreate}
	for _, f := range queue.SettingFields() {
		o.extra = append(o.extra, f.Name, f.Encode(set))
	}
	if q.taken != nil {
		o.taken = q.taken(room)
	}
	created, err := q.s.putRoom(ctx, room, shardSettings(set), o)
	if err != nil {
		return false, err
	}
	// A separate command: the rooms set is outside the room's slot; a
	// retry of the PUT repairs a failure between.
	if err := q.s.c.Do(ctx, q.s.c.B().Sadd().Key(q.roomsKey()).Member(room).Build()).Error(); err != nil {
		return false, unavailable("put room", room, err)
	}
	return created, nil
}

// shardSettings is the part of set that the lines keep.
func shardSettings(set queue.Settings) Settings {
	return Settings{
		Shards: int(set.Shards), Strategy: Strategy(set.ShardStrategy),
		MaxActive: set.MaxActive, AdmitRate: set.AdmitRate, Interval: set.Interval,
		ActiveTTL: set.ActiveTTL, ClaimWindow: set.ClaimWindow,
	}
}

func (q *QueueStore) roomsKey() string { return q.s.prefix + "rooms" }

// Rooms implements queue.Store.
func (q *QueueStore) Rooms(ctx context.Context) ([]string, error) {
	rooms, err := q.s.c.Do(ctx, q.s.c.B().Smembers().Key(q.roomsKey()).Build()).AsStrSlice()
	if err != nil {
		return nil, unavailable("rooms", "", err)
	}
	slices.Sort(rooms)
	return rooms, nil
}

// entry is e as queue.Entry: no sequence number.
func entry(e Entry) queue.Entry {
	return queue.Entry{Visitor: e.Visitor, Status: e.Status, Position: e.Position, ExpiresAt: e.ExpiresAt}
}

// Enter implements queue.Store. Position is the estimate from the
// visitor's shard. A sharded room has no priority lane
// (queue.Settings.PriorityShare is 0 for it): o.Lane gets ErrLanesOff, or
// ErrRoomNotFound for a room it does not hold.
func (q *QueueStore) Enter(ctx context.Context, room, visitor string, now time.Time, o queue.EnterOptions) (queue.Entry, bool, error) {
	if o.Lane != nil {
		if _, err := q.Stats(ctx, room, now); err != nil {
			return queue.Entry{}, false, err
		}
		return queue.Entry{}, false, fmt.Errorf("redisshard: enter lane %s: %w", room, queue.ErrLanesOff)
	}
	e, created, err := q.s.Enter(ctx, room, visitor, now)
	return entry(e), created, err
}

// Status implements queue.Store; Position is exact under counter and
// timestamp.
func (q *QueueStore) Status(ctx context.Context, room, visitor string, now time.Time) (queue.Entry, error) {
	e, err := q.s.Status(ctx, room, visitor, now)
	return entry(e), err
}

// Leave implements queue.Store.
func (q *QueueStore) Leave(ctx context.Context, room, visitor string) error {
	return q.s.Leave(ctx, room, visitor)
}

// Admit implements queue.Store.
func (q *QueueStore) Admit(ctx context.Context, room string, now time.Time) (queue.AdmitResult, error) {
	res, err := q.s.Admit(ctx, room, now)
	return queue.AdmitResult{Admitted: res.Admitted}, err
}

// Stats implements queue.Store. Waiting counts every line; LastSeq and
// HeadSeq are 0 and 1, so that no status poll is answered from a view.
// The same calls bring the line shards' copies of the state up to the
// home hash's version (SyncLines), so that a copy a PUT left behind (it
// stopped between its calls) or a shard lost is repaired at the next
// refresh, and take the room's layout from the hash, so that a room
// Redis lost and that was made again with another is found where it is.
func (q *QueueStore) Stats(ctx context.Context, room string, now time.Time) (queue.Stats, error) {
	home := q.s.homeKeys(room)
	res := q.s.c.DoMulti(ctx,
		q.s.c.B().Hgetall().Key(home[0]).Build(),
		q.s.c.B().Zcount().Key(home[1]).Min("("+ms(now)).Max("+inf").Build())
	named, err := res[0].AsStrMap()
	if err != nil {
		return queue.Stats{}, unavailable("stats", room, err)
	}
	active, err := res[1].AsInt64()
	if err != nil {
		return queue.Stats{}, unavailable("stats", room, err)
	}
	if _, ok := named["max_active"]; !ok { // no hash, or counters left in a lost room's
		return queue.Stats{}, q.s.notFound("stats", room)
	}
	set, err := queue.DecodeSettings(named)
	if err != nil {
		return queue.Stats{}, unavailable("stats", room, err)
	}
	st := queue.Stats{Settings: set, Active: active, HeadSeq: 1, Off: Off}
	if st.AdmittedTotal, err = strconv.ParseInt(named["admitted_total"], 10, 64); err != nil && named["admitted_total"] != "" {
		return queue.Stats{}, unavailable("stats", room, err)
	}
	st.Waiting, err = q.s.SyncLines(ctx, room, int(set.Shards), Strategy(set.ShardStrategy), named["shard_tags"],
		string(set.State), named["state_v"])
	if err != nil {
		return queue.Stats{}, fmt.Errorf("redisshard: stats %s: %w", room, err)
	}
	return st, nil
}

// SetInventory implements queue.Store: a sharded room keeps none yet.
func (q *QueueStore) SetInventory(ctx context.Context, room string, units int64) error {
	return fmt.Errorf("redisshard: set inventory %s: %w", room, errShardedInventory)
}

// DeleteRoom implements queue.Store: a sharded room cannot be deleted yet.
func (q *QueueStore) DeleteRoom(ctx context.Context, room string, force bool, now time.Time) error {
	if _, err := q.Stats(ctx, room, now); err != nil {
		return err
	}
	return fmt.Errorf("redisshard: delete room %s: %w", room, errShardedDelete)
}
