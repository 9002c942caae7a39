package redisshard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"usher/internal/queue"
	"usher/internal/queue/redisroom"
)

// QueueStore is the queue.Store of rooms of several shards: their lines
// are this package's, their settings the queue's, kept in the room's home
// hash beside this package's own with the room's inventory and its
// queue.Limits (the cap and the rate its steps follow; RefreshLimits).
// What a sharded line does not have yet is refused here, by name (Off).
// Entries carry no sequence number, so every status poll reaches the
// store. redisroute puts it beside the store of rooms of one shard.
type QueueStore struct {
	s *Store
	// taken names another store's hash of a room's slot: while it holds
	// settings, a room of one shard holds the name (nil: no check).
	taken func(room string) string
	// hash runs the scripts of the room's home hash that redisqueue runs
	// too: the inventory, the limits, the controller's state.
	hash *redisroom.Scripts
}

var (
	_ queue.Store        = (*QueueStore)(nil)
	_ queue.ControlStore = (*QueueStore)(nil)
)

// NewQueueStore returns the queue's store over s; taken, when set, names
// another store's hash of a room's slot (redisqueue's), so that making a
// sharded room of a name that store holds fails atomically.
func NewQueueStore(s *Store, taken func(room string) string) *QueueStore {
	return &QueueStore{s: s, taken: taken, hash: redisroom.New(s.c)}
}

// Refusals of what a sharded room has not yet.
var (
	errShardedDelete = queue.ErrInvalid.Detail("room: a room of several shards cannot be deleted yet")
	errOneShard      = queue.ErrInvalid.Detail("shards: this store keeps rooms of several shards")
)

// Off names, by JSON name, the settings a room of several shards keeps
// off: its line does not have them yet (Stats.Off).
var Off = []string{"presence_timeout_seconds", "claim_window_seconds", "max_waiting", "opens_at", "priority_share"}

// forShards is set as a room of several shards keeps it: what its line
// does not have is off where set leaves it at its default (presence
// parking), and its claim window is its active_ttl (a slot is held for
// active_ttl from admission). A value set otherwise is refused, naming
// the setting.
func forShards(set queue.Settings) (queue.Settings, error) {
	if set.PresenceTimeout == queue.DefaultSettings().PresenceTimeout {
		set.PresenceTimeout = 0
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
	case set.PriorityShare != 0:
		return set, conflict("priority_share", set.PriorityShare, "0", "priority lanes are not sharded yet")
	case set.MaxWaiting != 0:
		return set, conflict("max_waiting", set.MaxWaiting, "0", "the cap on the line is not sharded yet")
	case set.Queueing == queue.QueueRandom:
		return set, conflict("queueing", set.Queueing, "fifo, passthrough or reject", "the random draw is not sharded yet")
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
	if created || !po.OnlyCreate {
		q.refresh(ctx, room)
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

// Admit implements queue.Store. On limits older than their inputs it
// stores them anew (RefreshLimits) and steps again.
func (q *QueueStore) Admit(ctx context.Context, room string, now time.Time) (queue.AdmitResult, error) {
	res, err := q.s.Admit(ctx, room, now)
	for try := 0; errors.Is(err, errStaleLimits) && try < maxRefresh; try++ {
		if err = q.RefreshLimits(ctx, room, now); err == nil {
			res, err = q.s.Admit(ctx, room, now)
		}
	}
	if errors.Is(err, errStaleLimits) {
		err = unavailable("admit", room, err)
	}
	return queue.AdmitResult{Admitted: res.Admitted}, err
}

// errStaleLimits: a step found the room's limits older than their inputs
// and took nothing.
var errStaleLimits = errors.New("limits older than their inputs")

// maxRefresh bounds the steps Admit tries again over stale limits, and
// RefreshLimits' own tries: each fails only because another input was
// written since, whose writer stores the limits too.
const maxRefresh = 3

// RefreshLimits stores the room's queue.Limits computed from what its home
// hash holds, and brings the line shards' copies of its state to the state
// in effect (sold_out while its inventory is 0). Each write of an input
// calls it (through Stats, which does both).
func (q *QueueStore) RefreshLimits(ctx context.Context, room string, now time.Time) error {
	for range maxRefresh {
		if _, stale, err := q.stats(ctx, room, now, true); err != nil || !stale {
			return err
		}
	}
	return nil // inputs keep changing: their writers store the limits
}

// refresh stores the limits after a write of one of their inputs. An
// error leaves them marked older than their inputs, which the next step
// (Admit) or read (Stats) repairs.
func (q *QueueStore) refresh(ctx context.Context, room string) {
	_ = q.RefreshLimits(ctx, room, time.Now())
}

// Stats implements queue.Store. Waiting counts every line; LastSeq and
// HeadSeq are 0 and 1, so that no status poll is answered from a view.
// The same calls bring the line shards' copies of the state up to the
// home hash's version (SyncLines), so that a copy a PUT left behind (it
// stopped between its calls) or a shard lost is repaired at the next
// refresh, and take the room's layout from the hash, so that a room
// Redis lost and that was made again with another is found where it is.
func (q *QueueStore) Stats(ctx context.Context, room string, now time.Time) (queue.Stats, error) {
	st, _, err := q.stats(ctx, room, now, false)
	return st, err
}

// stats is Stats. It stores the limits when they are older than their
// inputs, or always, and reports whether an input was written before it
// could.
func (q *QueueStore) stats(ctx context.Context, room string, now time.Time, always bool) (queue.Stats, bool, error) {
	home := q.s.homeKeys(room)
	res := q.s.c.DoMulti(ctx,
		q.s.c.B().Hgetall().Key(home[0]).Build(),
		q.s.c.B().Zcount().Key(home[1]).Min("("+ms(now)).Max("+inf").Build())
	named, err := res[0].AsStrMap()
	if err != nil {
		return queue.Stats{}, false, unavailable("stats", room, err)
	}
	active, err := res[1].AsInt64()
	if err != nil {
		return queue.Stats{}, false, unavailable("stats", room, err)
	}
	if _, ok := named["max_active"]; !ok { // no hash, or counters left in a lost room's
		return queue.Stats{}, false, q.s.notFound("stats", room)
	}
	st, err := decodeStats(named)
	if err != nil {
		return queue.Stats{}, false, unavailable("stats", room, err)
	}
	st.Active = active
	stale := false
	if always || redisroom.Stale(named) {
		stored, err := q.hash.StoreLimits(ctx, []string{home[0], home[3]}, named, st.Settings.Limits(st.Control, st.Inventory))
		if err != nil {
			return queue.Stats{}, false, q.hashError("stats", room, err)
		}
		stale = !stored
	}
	// The copies take the state in effect for newcomers, so that the line
	// shards refuse entries into a room sold out by its inventory, or that
	// takes no newcomers (reject: closed to them, admitting its line).
	lineState := st.EffectiveState()
	if !lineState.Refuses() && !st.Settings.TakesNewcomers() {
		lineState = queue.Closed
	}
	st.Waiting, err = q.s.SyncLines(ctx, room, int(st.Settings.Shards), Strategy(st.Settings.ShardStrategy), named["shard_tags"],
		string(lineState), named["state_v"])
	if err != nil {
		return queue.Stats{}, false, fmt.Errorf("redisshard: stats %s: %w", room, err)
	}
	return st, stale, nil
}

// decodeStats reads the queue's part of a sharded room's home hash: its
// settings, admissions, inventory and controller state.
func decodeStats(named map[string]string) (queue.Stats, error) {
	set, err := queue.DecodeSettings(named)
	if err != nil {
		return queue.Stats{}, err
	}
	st := queue.Stats{Settings: set, HeadSeq: 1, Off: Off}
	if v := named["admitted_total"]; v != "" {
		if st.AdmittedTotal, err = strconv.ParseInt(v, 10, 64); err != nil {
			return queue.Stats{}, fmt.Errorf("admitted_total: %w", err)
		}
	}
	if v, ok := named["inventory"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return queue.Stats{}, fmt.Errorf("inventory: %w", err)
		}
		st.Inventory = queue.Inventory{Units: n, Known: true}
	}
	for _, f := range queue.ControlFields() {
		if v, ok := named[f.Name]; ok {
			if err := f.Decode(&st.Control, v); err != nil {
				return queue.Stats{}, fmt.Errorf("%s: %w", f.Name, err)
			}
		}
	}
	return st, nil
}

// SetInventory implements queue.Store.
func (q *QueueStore) SetInventory(ctx context.Context, room string, units int64) error {
	home := q.s.homeKeys(room)
	if err := q.hash.SetInventory(ctx, []string{home[0], home[3]}, units); err != nil {
		return q.hashError("set inventory", room, err)
	}
	q.refresh(ctx, room)
	return nil
}

// signalKeys are the home hash, the room's signal pool and the guard.
func (q *QueueStore) signalKeys(room string) []string {
	home := q.s.homeKeys(room)
	return []string{home[0], q.s.homeTag(room) + "signals2", home[3]}
}

// AddSignals implements queue.ControlStore.
func (q *QueueStore) AddSignals(ctx context.Context, room string, sig queue.Signals) (queue.Signals, error) {
	pool, err := q.hash.AddSignals(ctx, q.signalKeys(room), sig)
	if err != nil {
		return queue.Signals{}, q.hashError("add signals", room, err)
	}
	return pool, nil
}

// SetControl implements queue.ControlStore.
func (q *QueueStore) SetControl(ctx context.Context, room string, next queue.Control, used queue.Signals) (bool, error) {
	stored, err := q.hash.SetControl(ctx, q.signalKeys(room), next, used)
	if err != nil {
		return false, q.hashError("set control", room, err)
	}
	if stored {
		q.refresh(ctx, room)
	}
	return stored, nil
}

// hashError is an error of redisroom's as this store's.
func (q *QueueStore) hashError(op, room string, err error) error {
	if errors.Is(err, redisroom.ErrNoRoom) {
		return q.s.notFound(op, room)
	}
	return unavailable(op, room, err)
}

// DeleteRoom implements queue.Store: a sharded room cannot be deleted yet.
func (q *QueueStore) DeleteRoom(ctx context.Context, room string, force bool, now time.Time) error {
	if _, err := q.Stats(ctx, room, now); err != nil {
		return err
	}
	return fmt.Errorf("redisshard: delete room %s: %w", room, errShardedDelete)
}
