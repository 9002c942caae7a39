// Package redisshard spreads one hot room's waiting line over several Redis
// Cluster hash tags, so that its entries and polls reach several primaries.
// Store is the line; QueueStore is the queue.Store of rooms of several
// shards over it (redisroute puts it beside redisqueue). A sharded room has
// Enter, Status, Leave, the admission step and its state, not the rest: no
// passthrough, claim window, presence, draw, inventory cap, adaptive rate or
// deletion. The cap and the rate hold for the room as a whole whatever
// fails: only the home shard's scripts grant a slot. Shards and Strategy are
// fixed once the room exists.
//
// Limits: a step that dies between its calls makes the room admit less until
// its lease ends; a visitor whose step's acknowledgement is lost, and whose
// slot lapses before a later step reclaims it, is admitted twice; the shards'
// tags may share a primary after a resharding. Keys, phases, crashes:
// docs/architecture.md#redis-hot-room-sharding.
package redisshard

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/queue"
	"usher/internal/queue/redisroom"
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
		putRoomScript: rueidis.NewLuaScript(redisroom.ControlAfreshLua + putRoomLua),
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
	tags     string
	keys     [][]string
}

// remember is the layout of room with shards, strategy and tags
// (Settings.Tags), the one s holds if it is that, else a new one that s
// holds from now on.
func (s *Store) remember(room string, shards int, strategy Strategy, tags string) layout {
	if v, ok := s.rooms.Load(room); ok {
		if l := v.(layout); l.shards == shards && l.strategy == strategy && l.tags == tags {
			return l
		}
	}
	l := layout{shards: shards, strategy: strategy, tags: tags, keys: make([][]string, shards)}
	names := tagNames(tags, shards)
	for i := range l.keys {
		l.keys[i] = s.shardKeys(room, names[i])
	}
	s.rooms.Store(room, l)
	return l
}

// tagNames are the names of a room's shards in their hash tags: "" for the
// home shard, then tags' names (Settings.Tags), or the shard numbers
// where tags has none.
func tagNames(tags string, shards int) []string {
	given := strings.Split(tags, ",")
	names := make([]string, shards)
	for i := 1; i < shards; i++ {
		names[i] = strconv.Itoa(i)
		if tags != "" && i-1 < len(given) {
			names[i] = given[i-1]
		}
	}
	return names
}

// ShardOf is the shard of k that holds visitor: FNV-1a of the id, mod k.
func ShardOf(visitor string, k int) int {
	h := fnv.New32a()
	h.Write([]byte(visitor))
	return int(h.Sum32() % uint32(k))
}

// homeTag and shardTag are the hash tags: the home shard's is the room's,
// as in redisqueue, and line shard 0 shares it (name ""); line shard i's
// is {<room>#<name>}, its name from tagNames.
func (s *Store) homeTag(room string) string { return s.prefix + "{" + room + "}:" }

func (s *Store) shardTag(room, name string) string {
	if name == "" {
		return s.homeTag(room)
	}
	return s.prefix + "{" + room + "#" + name + "}:"
}

// HomeKey is the room's home hash: a store that shares the room names
// with this one refuses to make a room whose home hash exists
// (redisqueue's SetExclusive).
func (s *Store) HomeKey(room string) string { return s.homeKeys(room)[0] }

// WakeChannel is the channel on which PutRoom publishes a room's name, so
// that every instance's view re-reads it (queue.Waker).
func (s *Store) WakeChannel() string { return s.prefix + "wake" }

// homeKeys are meta, active, resv and the guard.
func (s *Store) homeKeys(room string) []string {
	t := s.homeTag(room)
	return []string{t + "meta", t + "active", t + "resv", t + "guard"}
}

// shardKeys are wait, meta, leases, admitted, taken and the guard of the
// shard named name (tagNames). Shard 0's meta is the home meta hash (the
// same tag): its fields (last, seq, t:<step>) do not collide with the
// home's.
func (s *Store) shardKeys(room, name string) []string {
	t := s.shardTag(room, name)
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

// Keys lists every key the room may have, home first, in the layout s
// holds for it, or with the shard numbers as tags (for tests and
// operators).
func (s *Store) Keys(room string, shards int) []string {
	tags := ""
	if v, ok := s.rooms.Load(room); ok && v.(layout).shards == shards {
		tags = v.(layout).tags
	}
	keys := s.homeKeys(room)
	for _, name := range tagNames(tags, shards) {
		keys = append(keys, s.shardKeys(room, name)...)
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
// (SetLineState). Shards, Strategy and Tags cannot change once the room
// exists (queue.ErrInvalid).
func (s *Store) PutRoom(ctx context.Context, room string, set Settings) error {
	_, err := s.putRoom(ctx, room, set, putOptions{})
	return err
}

// putOptions are what the queue's store adds to PutRoom: create only,
// more name/value pairs for the home hash, and another store's hash of the
// room's slot, which holds the room's name while it holds settings.
type putOptions struct {
	onlyCreate bool
	extra      []string
	taken      string
}

func (s *Store) putRoom(ctx context.Context, room string, set Settings, o putOptions) (created bool, err error) {
	if !queue.ValidRoomID(room) {
		return false, fmt.Errorf("redisshard: put room: %w", queue.ErrInvalid.Detail("room: want [a-z0-9][a-z0-9-]{0,63}"))
	}
	if err := set.Validate(); err != nil {
		return false, fmt.Errorf("redisshard: put room %s: %w", room, err)
	}
	if set.Tags == "" {
		if set.Tags, err = s.TagsFor(ctx, room, set.Shards); err != nil {
			return false, err
		}
	}
	only := "0"
	if o.onlyCreate {
		only = "1"
	}
	args := append(append([]string{only}, o.extra...), settingPairs(set)...)
	home := s.homeKeys(room)
	keys := []string{home[0], home[3]}
	if o.taken != "" {
		keys = []string{home[0], o.taken, home[3]}
	}
	r, err := s.exec(ctx, s.putRoomScript, keys, args).ToArray()
	if err != nil || len(r) < 3 {
		return false, unavailable("put room", room, fmt.Errorf("reply %v: %v", r, err))
	}
	code, err := r[0].AsInt64()
	switch {
	case err != nil:
		return false, unavailable("put room", room, err)
	case code < 0: // -1 the layout changed, -2 another store holds the name
		return false, fmt.Errorf("redisshard: put room %s: %w", room, queue.ErrShardsFixed)
	}
	state, err1 := r[1].ToString()
	version, err2 := r[2].ToString()
	if err := errors.Join(err1, err2); err != nil {
		return false, unavailable("put room", room, err)
	}
	if code == 0 && o.onlyCreate {
		return false, nil
	}
	return code == 1, s.SetLineState(ctx, room, set.Shards, set.Strategy, set.Tags, state, version)
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
	return s.remember(room, set.Shards, set.Strategy, set.Tags), nil
}
