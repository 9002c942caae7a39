// Package redisshard is one hot room's line spread over several Redis
// Cluster shards (issue 11 §3; seed 003 §7): its core operations only —
// Enter, Status, Leave and the admission step, Admit, in the room's state
// (a state field in the home meta hash, open unless set, and its copy on
// each line shard, SetLineState: paused, closed and sold_out admit nobody,
// closed and sold_out refuse newcomers) — not the whole
// queue.Store (no pre-queue draw, presence parking, inventory cap,
// adaptive rate, passthrough, claim window, room deletion or listing
// yet). It is what the strategies were built and measured with
// (docs/benchmarks.md#one-hot-room-over-several-shards-issue-11-3), and
// what redisqueue keeps the line of a room of several shards in
// (redisqueue/sharded.go: its room hash is this package's home meta hash).
//
// Four strategies (Settings.Strategy): Counter, Timestamp and Estimate
// keep a sorted set of waiting visitors per shard, as redisqueue does per
// room; CountersOnly keeps no waiting visitor at all (counters.go): a
// visitor is a number of its shard's counter, carried by its ticket, and
// the room releases turns rather than naming visitors.
//
// A room has a home shard and Settings.Shards line shards, each its own
// hash tag so that Redis Cluster may place them on different primaries:
//
//	<prefix>{<room>}:meta        home: settings, state and state_v, the token bucket, the counter's seq, admitted_total, r:<step> reservations
//	<prefix>{<room>}:active      home: admitted visitor → expiry (ms); the only authority on who holds a slot
//	<prefix>{<room>}:resv        home: step id → lease end (ms), the steps between reserve and commit
//	<prefix>{<room#i>}:wait      line shard i: visitor → score (shard 0 uses the home tag {<room>})
//	<prefix>{<room#i>}:meta      line shard i: the copy of state and state_v, the shard's last score or seq, t:<step> what a step took
//	<prefix>{<room#i>}:leases    line shard i: step id → lease end (ms), the steps not yet acknowledged
//	<prefix>{<room#i>}:admitted  line shard i: a copy of its admitted visitors → expiry, for Enter and Status
//	<prefix>{<room#i>}:taken     line shard i: visitor → "<step>:<score>", the step in flight that took it (pop to ack or reclaim)
//	…:guard                      never written; every script declares its slot's (redisqueue.Store's guard key)
//
// and for CountersOnly, besides meta (h:<i> each shard's head, c:<batch>
// claims) and active, and each line shard's meta (lseq, its counter):
//
//	<prefix>{<room>}:turns       home: released batch "i:first:last" → i × 2^40 + first
//	<prefix>{<room>}:turn_ends   home: batch → end of its claim window (ms)
//
// A visitor's shard is a hash of its id (ShardOf), so Enter, Status and
// Leave find it without asking anyone. The cap (max_active) and the rate
// (admit_rate, a token bucket) are kept exact for the room as a whole by
// keeping the active set and the bucket in one place, the home shard, and
// making its scripts the only ones that grant a slot: a Lua script may
// touch only one slot's keys on a Cluster, and any split of the bucket or
// the cap over shards would either let shards admit beyond the room's cap
// between two syncs or leave a shard's share idle while another's line is
// long. The home shard's load is a handful of calls per admission step,
// never per waiting visitor (except the counter strategy's one HINCRBY per
// entry, in seq.lua, which is what that strategy costs).
//
// An admission step of a line strategy is five phases (Admit):
// reserve.lua on the home shard takes n tokens and n free slots under the
// step's id with a lease (other steps count the reservation as taken
// slots); peek.lua reads the heads of
// the shards (counter and timestamp: a K-way merge picks the n lowest
// scores; estimate: none, it takes n/K from each shard round-robin);
// pop.lua takes them from each shard and records them under the step's id
// with the same lease; commit.lua on the home shard makes them active,
// counting the cap and the rate again (a reservation whose lease passed is
// ignored and fresh tokens are taken), dropping visitors already active,
// and refunding unused tokens; ack.lua on each shard ends the record, puts
// back what the commit did not admit with its old score (compensation),
// and notes the admitted in the shard's copy (and takes them out of the
// line), acting only on the visitors still in the step's record: one who
// left meanwhile is neither put back nor noted. A visitor a step has
// taken keeps that place until the step ends: its Enter (a reload)
// answers waiting at 1, as Status does, and gives it no new place, unless
// the home shard's active set holds it (the step committed it: active;
// Enter and Status ask the home shard about a visitor in a step's record,
// one more call for those only); Enter and Status read the shard's copy
// of the admitted before its line. The
// shard calls of one phase
// run concurrently, so a step takes five round trips (four without the
// peek: under Estimate, or with one shard). A CountersOnly step is two:
// the shards' counters, read concurrently, then release.lua on the home
// shard, which is atomic on its own (nothing is taken from a shard, so a
// crash leaves nothing behind).
//
// What a crash (or a lost answer) between two calls leaves behind, and
// what repairs it:
//   - after reserve: a reservation holds slots until its lease ends (Store
//     lease, 5 s by default) and its tokens are lost: the room admits less,
//     never more, for that long.
//   - after pop, before commit: the taken visitors are out of the line;
//     the next peek.lua or pop.lua on that shard after the lease puts them
//     back with their scores (reclaim.lua), so they keep their places. A
//     visitor taken this way is "waiting" to Status meanwhile.
//   - after commit, before ack: the visitors are active; after the lease
//     reclaim.lua puts them back in line too, and the commit.lua of the
//     step that takes them again drops them as already active (no token,
//     no slot), and that step's ack.lua notes them in the shard's copy of
//     the admitted with the end of their slots, as if admitted then (the
//     first step's late ack, if it comes, finds no record and does
//     nothing). Enter and Status answer active meanwhile (from the home
//     shard's active set). A room that admits nobody meanwhile (full,
//     paused, closed, sold out: reserve.lua answers 0 and no pop runs)
//     leaves the record in place for as long: a visitor whose slot
//     lapses before a step takes it again is "waiting" at 1, and that
//     step admits it again, from its old place (see Limits).
//
// Scripts never run half (the guard key, as in redisqueue), the cap is
// never exceeded and the rate never beaten whatever fails: only the home
// scripts grant slots and they count both afresh. A step slower than its
// lease may admit a visitor twice if its slot also expired in between
// (the lease is seconds, a slot minutes).
//
// A room exists where its hash holds state: every script that could write
// into a room Redis has lost (a flush, a failover to an empty replica)
// checks first (enter.lua, status.lua, leave.lua and seq.lua, the
// counters' HINCRBY, on the visitor's shard's copy; reserve.lua and
// commit.lua the home hash's settings) and answers not found, writing
// nothing; the store then forgets the
// room's layout (SetLineState and SyncLines also take it afresh, from the
// home hash, at every PutRoom and Stats refresh), and PutRoom makes the room again (put_room.lua replaces a
// hash without settings). A line shard's copy carries the version of the
// home's state (state_v: the creation time in µs, plus one per update), and
// is written only by a newer one (line_state.lua), so that two updates
// whose copies cross leave the later state; SyncLines (redisqueue's Stats)
// writes a copy missing or behind. Until then a line shard that lost its
// copy answers not found, and one that kept its copy while the home hash
// was lost takes newcomers into a line no step reaches until the room is
// made again (with the same layout, they are then in its line).
//
// Limits: a visitor whose step's ack is lost holds its slot but stays in
// the step's record on its shard until a pop there reclaims it after the
// lease; if its slot lapses before a step takes it again, that step
// admits it a second time (a shard cannot ask the home shard whether a
// reclaimed visitor was admitted). A room that admits nobody for a whole
// slot (full, or paused) runs no pop: there, every such visitor is
// admitted twice. Leave of a visitor taken by a step in flight takes it out of the
// step's record (the step's ack neither puts it back in line nor notes it
// as admitted), but the step's commit, if it comes after, still admits it:
// it holds a slot until the slot lapses. Shards and strategy are fixed when the room is
// created (a visitor's shard depends on them); PutRoom refuses to change
// them. Hash tags are placed by CRC16, not by primary: K shards on P
// primaries are balanced only on average (check with CLUSTER KEYSLOT, or
// use several shards per primary).
package redisshard

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/queue"
	"usher/internal/redisscript"
)

var (
	//go:embed lua/bucket.lua
	bucketLua string
	//go:embed lua/reclaim.lua
	reclaimLua string
	//go:embed lua/put_room.lua
	putRoomLua string
	//go:embed lua/reserve.lua
	reserveLua string
	//go:embed lua/commit.lua
	commitLua string
	//go:embed lua/place.lua
	placeLua string
	//go:embed lua/enter.lua
	enterLua string
	//go:embed lua/status.lua
	statusLua string
	//go:embed lua/peek.lua
	peekLua string
	//go:embed lua/pop.lua
	popLua string
	//go:embed lua/ack.lua
	ackLua string
	//go:embed lua/leave.lua
	leaveLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/claim.lua
	claimLua string
	//go:embed lua/seq.lua
	seqLua string
	//go:embed lua/line_state.lua
	lineStateLua string
)

// DefaultLease is how long a step's reservation and its taken visitors
// are held for it before another step may use them (New).
const DefaultLease = 5 * time.Second

// Store keeps sharded rooms in Redis. It is safe for concurrent use.
type Store struct {
	c      rueidis.Client
	prefix string
	lease  time.Duration
	rooms  sync.Map // room → layout, read once from the home shard

	putRoomScript, reserve, commit, enter, status, peek, pop, ack, leave, release, claim *rueidis.Lua
	seq, lineState                                                                       *rueidis.Lua
}

// New returns a store that keeps its keys under prefix on the server or
// cluster behind c, holding a step's reservation for lease (DefaultLease
// when 0). The caller owns c.
func New(c rueidis.Client, prefix string, lease time.Duration) *Store {
	if lease <= 0 {
		lease = DefaultLease
	}
	return &Store{
		c:             c,
		prefix:        prefix,
		lease:         lease,
		putRoomScript: rueidis.NewLuaScript(putRoomLua),
		reserve:       rueidis.NewLuaScript(redisscript.RefillLua + bucketLua + reserveLua),
		commit:        rueidis.NewLuaScript(redisscript.RefillLua + bucketLua + commitLua),
		enter:         rueidis.NewLuaScript(placeLua + enterLua),
		status:        rueidis.NewLuaScript(placeLua + statusLua),
		peek:          rueidis.NewLuaScript(reclaimLua + peekLua),
		pop:           rueidis.NewLuaScript(reclaimLua + popLua),
		ack:           rueidis.NewLuaScript(reclaimLua + ackLua),
		leave:         rueidis.NewLuaScript(leaveLua),
		release:       rueidis.NewLuaScript(redisscript.RefillLua + bucketLua + releaseLua),
		claim:         rueidis.NewLuaScript(claimLua),
		seq:           rueidis.NewLuaScript(seqLua),
		lineState:     rueidis.NewLuaScript(lineStateLua),
	}
}

// layout is what every call needs to find a room's keys: its shards,
// strategy, and each shard's keys (shardKeys), built once per layout.
type layout struct {
	shards   int
	strategy Strategy
	keys     [][]string
}

// remember is the layout of room with shards and strategy, the one s
// holds if it is that, else a new one that s holds from now on.
func (s *Store) remember(room string, shards int, strategy Strategy) layout {
	if v, ok := s.rooms.Load(room); ok {
		if l := v.(layout); l.shards == shards && l.strategy == strategy {
			return l
		}
	}
	l := layout{shards: shards, strategy: strategy, keys: make([][]string, shards)}
	for i := range l.keys {
		l.keys[i] = s.shardKeys(room, i)
	}
	s.rooms.Store(room, l)
	return l
}

// ShardOf is the shard of k that holds visitor: FNV-1a of the id, mod k.
func ShardOf(visitor string, k int) int {
	h := fnv.New32a()
	h.Write([]byte(visitor))
	return int(h.Sum32() % uint32(k))
}

// homeTag and shardTag are the hash tags: the home shard's is the room's,
// as in redisqueue, and line shard 0 shares it.
func (s *Store) homeTag(room string) string { return s.prefix + "{" + room + "}:" }

func (s *Store) shardTag(room string, i int) string {
	if i == 0 {
		return s.homeTag(room)
	}
	return s.prefix + "{" + room + "#" + strconv.Itoa(i) + "}:"
}

// homeKeys are meta, active, resv and the guard.
func (s *Store) homeKeys(room string) []string {
	t := s.homeTag(room)
	return []string{t + "meta", t + "active", t + "resv", t + "guard"}
}

// shardKeys are wait, meta, leases, admitted, taken and the guard of
// shard i. Shard 0's meta is the home meta hash (the same tag): its fields
// (last, seq, t:<step>) do not collide with the home's.
func (s *Store) shardKeys(room string, i int) []string {
	t := s.shardTag(room, i)
	return []string{t + "wait", t + "meta", t + "leases", t + "admitted", t + "taken", t + "guard"}
}

// Indexes in shardKeys.
const (
	kWait = iota
	kMeta
	kLeases
	kAdmitted
	kTaken
	kGuard
)

// pick lists keys[i] for each i.
func pick(keys []string, idx ...int) []string {
	out := make([]string, len(idx))
	for j, i := range idx {
		out[j] = keys[i]
	}
	return out
}

// Keys lists every key the room may have, home first (for tests and
// operators).
func (s *Store) Keys(room string, shards int) []string {
	keys := s.homeKeys(room)
	for i := range shards {
		keys = append(keys, s.shardKeys(room, i)...)
	}
	return keys
}

// exec runs a script whose last key is its slot's guard.
func (s *Store) exec(ctx context.Context, script *rueidis.Lua, keys, args []string) rueidis.RedisResult {
	return redisscript.Exec(ctx, s.c, script, keys, args)
}

func unavailable(op, room string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("redisshard: %s %s: %w: %w", op, room, queue.ErrUnavailable, err)
	}
	return fmt.Errorf("redisshard: %s %s: %w: %v", op, room, queue.ErrUnavailable, err)
}

// Forget drops the room's layout that s remembers: the room went, or was
// made again with another (the caller learned it from the room's hash).
func (s *Store) Forget(room string) { s.rooms.Delete(room) }

// notFound is the answer for a room that does not exist. The store
// forgets the room's layout: a room Redis lost may be made again, with
// another.
func (s *Store) notFound(op, room string) error {
	s.Forget(room)
	return fmt.Errorf("redisshard: %s %s: %w", op, room, queue.ErrRoomNotFound)
}

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// PutRoom creates the room or updates its settings, then writes the
// room's state (open unless set otherwise) to its line shards
// (SetLineState). Shards and Strategy cannot change once the room exists
// (queue.ErrInvalid).
func (s *Store) PutRoom(ctx context.Context, room string, set Settings) error {
	if !queue.ValidRoomID(room) {
		return fmt.Errorf("redisshard: put room: %w", queue.ErrInvalid.Detail("room: want [a-z0-9][a-z0-9-]{0,63}"))
	}
	if err := set.Validate(); err != nil {
		return fmt.Errorf("redisshard: put room %s: %w", room, err)
	}
	args := append([]string{"0"}, settingPairs(set)...)
	keys := s.homeKeys(room)
	r, err := s.exec(ctx, s.putRoomScript, []string{keys[0], keys[3]}, args).ToArray()
	if err != nil || len(r) < 3 {
		return unavailable("put room", room, fmt.Errorf("reply %v: %v", r, err))
	}
	code, err := r[0].AsInt64()
	if err != nil {
		return unavailable("put room", room, err)
	}
	if code < 0 {
		return fmt.Errorf("redisshard: put room %s: %w", room,
			queue.ErrInvalid.Detail("shards, shard_strategy: fixed when the room was created"))
	}
	state, err1 := r[1].ToString()
	version, err2 := r[2].ToString()
	if err := errors.Join(err1, err2); err != nil {
		return unavailable("put room", room, err)
	}
	return s.SetLineState(ctx, room, set.Shards, set.Strategy, state, version)
}

// Settings reads the room's settings from its home shard.
func (s *Store) Settings(ctx context.Context, room string) (Settings, error) {
	named, err := s.c.Do(ctx, s.c.B().Hgetall().Key(s.homeKeys(room)[0]).Build()).AsStrMap()
	if err != nil {
		return Settings{}, unavailable("settings", room, err)
	}
	if _, ok := named["max_active"]; !ok { // no hash, or counters left in a lost room's
		return Settings{}, s.notFound("settings", room)
	}
	set, err := decodeSettings(named)
	if err != nil {
		return Settings{}, unavailable("settings", room, err)
	}
	return set, nil
}

// layoutOf returns the room's shards and strategy, read once.
func (s *Store) layoutOf(ctx context.Context, op, room string) (layout, error) {
	if v, ok := s.rooms.Load(room); ok {
		return v.(layout), nil
	}
	set, err := s.Settings(ctx, room)
	if err != nil {
		if errors.Is(err, queue.ErrRoomNotFound) {
			return layout{}, s.notFound(op, room)
		}
		return layout{}, err
	}
	return s.remember(room, set.Shards, set.Strategy), nil
}
