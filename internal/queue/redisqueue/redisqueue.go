// Package redisqueue is the queue.Store on Redis: the backend for several
// usher instances sharing rooms, and for rooms that outlive a restart.
//
// A room is a few keys under one hash tag (one Cluster slot), and every
// method on a room is one Lua script (lua/*.lua): atomic however many
// instances share the server. A call that fails with queue.ErrUnavailable
// may still have run. PutRoom and DeleteRoom also write the room index,
// <prefix>rooms, in a second command: a failure between leaves a room
// unlisted, or an id listed without a room, until retried. It keeps one line
// per room (redisroute sends rooms of several shards to redisshard).
//
// Limits: millisecond times; durability is the server's (without AOF or
// replication a Redis restart loses the queue). Tested on Redis 7.0; needs
// 5.0. Keys and scripts: docs/architecture.md#redisqueue.
package redisqueue

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/queue"
	"usher/internal/queue/redisroom"
	"usher/internal/redisscript"
)

var (
	_ queue.Store        = (*Store)(nil)
	_ queue.ControlStore = (*Store)(nil)
)

var (
	//go:embed lua/put_room.lua
	putRoomLua string
	//go:embed lua/limits.lua
	limitsLua string
	//go:embed lua/draw.lua
	drawLua string
	//go:embed lua/presence.lua
	presenceLua string
	//go:embed lua/enter.lua
	enterLua string
	//go:embed lua/status.lua
	statusLua string
	//go:embed lua/leave.lua
	leaveLua string
	//go:embed lua/admit.lua
	admitLua string
	//go:embed lua/stats.lua
	statsLua string
	//go:embed lua/delete_room.lua
	deleteRoomLua string
)

// sentinelRefresh is how often a client through Sentinel checks the master
// set's primary besides listening for failovers.
const sentinelRefresh = 5 * time.Second

// Result kinds returned by enter.lua and status.lua.
const (
	kindNotFound = 0
	kindClosed   = 1
	kindWaiting  = 2
	kindActive   = 3
	kindGone     = 4
	kindNeedKey  = 5
	kindFull     = 6
	kindLaneUsed = 7
	kindLanesOff = 8
)

// Store is a queue.Store on Redis. It is safe for concurrent use; concurrent
// calls share the client's connections through rueidis' auto-pipelining.
type Store struct {
	c      rueidis.Client
	prefix string
	seeds  sync.Map // room → drawSeed, read from the store while its draw is pending
	// roomKeys holds each room's roomKeys, keyRooms how many (maxKeyRooms).
	roomKeys sync.Map
	keyRooms atomic.Int64
	// exclusive, when set, names another store's hash of a room's slot
	// (SetExclusive).
	exclusive func(room string) string

	putRoomScript, enter, status, leave, admit, stats, deleteRoom *rueidis.Lua
	// ack is how many replicas must have a write of enter, admit or leave
	// before it is acknowledged (SetAck); acks runs the WAITs.
	ack  Ack
	acks acker
	// hash runs the scripts of the room's hash that redisshard runs too.
	hash *redisroom.Scripts
	// lineage follows the server's replication ID (Stats.Since).
	lineage lineage
}

// New returns a store that keeps its keys under prefix (usher uses "usher:")
// on the server behind c. Several stores with different prefixes may share a
// server. The caller owns c and closes it after the last call.
func New(c rueidis.Client, prefix string) *Store {
	s := &Store{
		c:             c,
		prefix:        prefix,
		putRoomScript: rueidis.NewLuaScript(redisroom.ControlAfreshLua + putRoomLua),
		enter:         rueidis.NewLuaScript(redisscript.RefillLua + limitsLua + drawLua + presenceLua + enterLua),
		status:        rueidis.NewLuaScript(drawLua + presenceLua + statusLua),
		leave:         rueidis.NewLuaScript(leaveLua),
		admit:         rueidis.NewLuaScript(redisscript.RefillLua + limitsLua + drawLua + admitLua),
		stats:         rueidis.NewLuaScript(statsLua),
		hash:          redisroom.New(c),
		deleteRoom:    rueidis.NewLuaScript(deleteRoomLua),
	}
	s.acks.s = s
	return s
}

// Ack is how a store acknowledges the writes that a failover must not
// lose: an entry, an admission, a leave, and a status that says active
// (a pass is issued on it). With Replicas > 0 each is
// followed by WAIT Replicas Timeout (acker: one for many calls); fewer
// replicas than Replicas having it within Timeout make the call fail
// with queue.ErrUnavailable (503: the visitor retries; each is safe to
// repeat) although the write stays on the primary. Replication being
// asynchronous, this is what keeps an acknowledged place through a
// failover or a partition (docs/operations.md#redis-high-availability).
// Not for a Redis Cluster (Open refuses it).
type Ack struct {
	Replicas int64
	Timeout  time.Duration
}

// DefaultAck is a Sentinel URL's acknowledgement: one replica, within
// 100 ms.
var DefaultAck = Ack{Replicas: 1, Timeout: 100 * time.Millisecond}

// SetAck sets how the store acknowledges entries, admissions and leaves.
// Call it before the store is used.
func (s *Store) SetAck(a Ack) { s.ack = a }

// ackChannel is published to before each WAIT, by nobody listening: it
// moves the waiting connection's replication offset past every write the
// server made before, whichever connection made it (WAIT waits for the
// connection's own last write).
func (s *Store) ackChannel() string { return s.prefix + "ack" }

// errNotReplicated is WAIT's answer short of Ack.Replicas.
var errNotReplicated = errors.New("too few replicas have the write")

// execAck runs script like exec and, with s.ack.Replicas > 0, answers
// only once that many replicas have its write (acker.wait).
func (s *Store) execAck(ctx context.Context, script *rueidis.Lua, keys, args []string) rueidis.RedisResult {
	r := s.exec(ctx, script, keys, args)
	if s.ack.Replicas <= 0 || r.Error() != nil {
		return r
	}
	if err := s.acks.wait(ctx); err != nil {
		return rueidis.NewErrorResult(err)
	}
	return r
}

// acker commits in groups: the calls whose writes have been answered wait
// together for one round of PUBLISH and WAIT, sent in one DoMulti, which
// rueidis runs on one connection of its pool for blocking commands (so
// WAIT follows the PUBLISH and blocks no pipelined call). A round starts
// after each of its callers had its reply, so the PUBLISH follows their
// writes and the WAIT covers them. One round runs at a time; the calls
// that arrive meanwhile make the next: one WAIT per round trip however
// many calls, instead of one per call.
type acker struct {
	s       *Store
	mu      sync.Mutex
	next    []chan error
	running bool // a loop runs rounds until next is empty
}

// wait returns once a round that started after the call has answered, or
// ctx ends.
func (a *acker) wait(ctx context.Context) error {
	ch := make(chan error, 1)
	a.mu.Lock()
	a.next = append(a.next, ch)
	if !a.running {
		a.running = true
		go a.loop()
	}
	a.mu.Unlock()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *acker) loop() {
	for {
		a.mu.Lock()
		batch := a.next
		a.next = nil
		if len(batch) == 0 {
			a.running = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		err := a.round()
		for _, ch := range batch {
			ch <- err
		}
	}
}

// round is one PUBLISH and WAIT.
func (a *acker) round() error {
	s, want := a.s, a.s.ack
	ctx, cancel := context.WithTimeout(context.Background(), want.Timeout+2*time.Second)
	defer cancel()
	rs := s.c.DoMulti(ctx,
		s.c.B().Publish().Channel(s.ackChannel()).Message("").Build(),
		s.c.B().Wait().Numreplicas(want.Replicas).Timeout(max(1, want.Timeout.Milliseconds())).Build())
	got, err := rs[1].AsInt64()
	if err == nil {
		err = rs[0].Error()
	}
	if err != nil {
		return err
	}
	if got < want.Replicas {
		return fmt.Errorf("%w: %d of %d within %v", errNotReplicated, got, want.Replicas, want.Timeout)
	}
	return nil
}

// SetExclusive names, for each room, another store's hash of the room's
// slot: while it holds settings, that store holds the room's name, and
// PutRoom and CreateRoom refuse it (queue.ErrShardsFixed), atomically.
// Call it before the store is used.
func (s *Store) SetExclusive(key func(room string) string) { s.exclusive = key }

// Wakes implements queue.Waker: it calls wake with the name of each room
// whose settings or inventory a store changed (put_room.lua and
// set_inventory.lua publish it on <prefix>wake), until ctx ends or the
// subscription breaks. Redis Pub/Sub delivers at most once: a message
// lost meanwhile is caught by the view's next idle read.
func (s *Store) Wakes(ctx context.Context, wake func(room string)) error {
	return Wakes(ctx, s.c, wake, s.prefix+"wake")
}

// Wakes subscribes to channels on c and calls wake with each message (a
// room's name) until ctx ends or the subscription breaks; redisshard's
// redisroute listens to its sharded rooms' channel too.
func Wakes(ctx context.Context, c rueidis.Client, wake func(room string), channels ...string) error {
	err := c.Receive(ctx, c.B().Subscribe().Channel(channels...).Build(), func(m rueidis.PubSubMessage) { wake(m.Message) })
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("redisqueue: wakes: %w: %v", queue.ErrUnavailable, err)
	}
	return nil
}

// MetaKey is the key of the room's hash (the key other stores check for
// the room's name).
func (s *Store) MetaKey(room string) string { return s.keys(room).meta() }

// Open connects to the Redis server at rawURL (redis://[user:password@]host:port[/db]
// or rediss:// for TLS; see rueidis.ParseURL for the options) and checks it
// answers a PING within ctx. Failing to reach it wraps queue.ErrUnavailable.
//
// A Redis Cluster needs no option: the host and any addr parameters are
// seed nodes (redis://node-a:6379?addr=node-b:6379), rueidis reads the slot
// map from the first that answers, sends each call to its slot's primary
// and follows MOVED and ASK. A cluster has only database 0.
//
// A URL with master_set connects through Sentinel: its host and its addr
// parameters are the sentinels, the master set's current primary serves
// every call, and a failover moves the client to the new primary
// (docs/operations.md#redis-high-availability). A password in the URL is
// the primary's; the sentinels are reached without one, and without TLS.
//
// Open checks the URL's wait_replicas and wait_ms (ParseAck), which the
// caller gives the stores it makes on the client (SetAck).
func Open(ctx context.Context, rawURL string) (rueidis.Client, error) {
	opt, err := rueidis.ParseURL(rawURL)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // url.Error repeats the URL, password included
		}
		return nil, fmt.Errorf("redisqueue: open: bad url (want redis://host:port/db, rediss://… or redis://sentinel:port/db?addr=…&master_set=name): %v", err)
	}
	opt.DisableCache = true // no client-side caching: every read must see the latest write
	if opt.Sentinel.MasterSet != "" {
		// Through Sentinel, rueidis follows +switch-master events; a periodic
		// check recovers from a missed one (rueidis.SentinelOption).
		opt.Sentinel.TopologyRefreshInterval = sentinelRefresh
	}
	ack, err := ParseAck(rawURL)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprint(opt.InitAddress)
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("redisqueue: open %s: %w: %v", addr, queue.ErrUnavailable, err)
	}
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redisqueue: open %s: ping: %w: %v", addr, queue.ErrUnavailable, err)
	}
	if ack.Replicas > 0 && c.Mode() == rueidis.ClientModeCluster {
		c.Close()
		return nil, fmt.Errorf("redisqueue: open %s: wait_replicas is not supported on a Redis Cluster", addr)
	}
	return c, nil
}

// ParseAck reads the acknowledgement a Redis URL asks for (Ack):
// wait_replicas (default 1 through Sentinel, else 0) and wait_ms (default
// 100).
func ParseAck(rawURL string) (Ack, error) {
	a := Ack{Timeout: DefaultAck.Timeout}
	if opt, err := rueidis.ParseURL(rawURL); err == nil && opt.Sentinel.MasterSet != "" {
		a = DefaultAck
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return a, nil // ParseURL has accepted it
	}
	q := u.Query()
	if v := q.Get("wait_replicas"); v != "" {
		if a.Replicas, err = strconv.ParseInt(v, 10, 64); err != nil || a.Replicas < 0 {
			return a, fmt.Errorf("redisqueue: open: bad wait_replicas %q (want a count of replicas, 0 for none)", v)
		}
	}
	if v := q.Get("wait_ms"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return a, fmt.Errorf("redisqueue: open: bad wait_ms %q (want milliseconds, at least 1)", v)
		}
		a.Timeout = time.Duration(n) * time.Millisecond
	}
	return a, nil
}

// roomKeys are a room's keys as its scripts take them: meta, wait,
// active, pre, seen, parked, back and lane, then the guard (exec),
// which every script declares last. Its capacity is its length: an append
// copies.
type roomKeys []string

func (k roomKeys) meta() string  { return k[0] }
func (k roomKeys) guard() string { return k[len(k)-1] }

// with returns the first n keys, then extra, then the guard.
func (k roomKeys) with(n int, extra ...string) []string {
	out := make([]string, 0, n+len(extra)+1)
	return append(append(append(out, k[:n]...), extra...), k.guard())
}

// maxKeyRooms bounds the rooms whose keys a Store keeps (about 300 bytes
// each): past it the cache starts over, so that calls naming made-up rooms
// cannot grow it. An instance holding more rooms builds their keys again
// now and then, as it did on every call before there was a cache.
const maxKeyRooms = 16384

// keys returns the room's keys, built once per room: nine substrings of
// one string.
func (s *Store) keys(room string) roomKeys {
	if k, ok := s.roomKeys.Load(room); ok {
		return k.(roomKeys)
	}
	base := s.prefix + "{" + room + "}:"
	var all []byte
	ends := make([]int, len(keyNames))
	for i, n := range keyNames {
		all = append(append(all, base...), n...)
		ends[i] = len(all)
	}
	joined := string(all)
	k := make(roomKeys, len(keyNames))
	for i, end := range ends {
		k[i] = joined[end-len(base)-len(keyNames[i]) : end]
	}
	if s.keyRooms.Add(1) > maxKeyRooms {
		s.roomKeys.Clear()
		s.keyRooms.Store(1)
	}
	s.roomKeys.Store(room, k)
	return k
}

// keyNames are the suffixes of roomKeys, in order.
var keyNames = [...]string{"meta", "wait", "active", "pre", "seen", "parked", "back", "lane", "guard"}

// drawSeed is a room's draw seed with its commitment.
type drawSeed struct {
	seed       []byte
	commitment string
}

// drawArgs returns the visitor's draw key and the seed's commitment as
// scripts take them, or two empty strings when the room's seed is not
// cached.
func (s *Store) drawArgs(room, visitor string) (key, commitment string) {
	v, ok := s.seeds.Load(room)
	if !ok {
		return "", ""
	}
	d := v.(drawSeed)
	k := queue.DrawKey(d.seed, visitor)
	return string(k[:]), d.commitment
}

// loadSeed reads the room's draw seed into the cache.
func (s *Store) loadSeed(ctx context.Context, op, room string) error {
	h, err := s.c.Do(ctx, s.c.B().Hget().Key(s.keys(room).meta()).Field("draw_seed").Build()).ToString()
	if err != nil {
		return unavailable(op, room, err)
	}
	return s.cacheSeed(room, h)
}

// cacheSeed caches the room's seed from its hex form.
func (s *Store) cacheSeed(room, h string) error {
	seed, err := hex.DecodeString(h)
	if err != nil || len(seed) != queue.SeedSize {
		return unavailable("draw seed", room, fmt.Errorf("bad seed of %d hex digits", len(h)))
	}
	if v, ok := s.seeds.Load(room); !ok || !bytes.Equal(v.(drawSeed).seed, seed) {
		s.seeds.Store(room, drawSeed{seed: seed, commitment: queue.Commitment(seed)})
	}
	return nil
}

// withKey runs a script that takes a visitor's draw key as a result kind
// tells: again with the room's seed read from the store when the first run
// answers kindNeedKey.
func (s *Store) withKey(ctx context.Context, op, room, visitor string, run func(key, commitment string) ([]int64, error)) ([]int64, error) {
	key, commitment := s.drawArgs(room, visitor)
	r, err := run(key, commitment)
	if err != nil || len(r) == 0 || r[0] != kindNeedKey {
		return r, err
	}
	if err := s.loadSeed(ctx, op, room); err != nil {
		return nil, err
	}
	key, commitment = s.drawArgs(room, visitor)
	if r, err = run(key, commitment); err == nil && len(r) > 0 && r[0] == kindNeedKey {
		return nil, unavailable(op, room, errors.New("the draw seed changed twice"))
	}
	return r, err
}

func (s *Store) roomsKey() string { return s.prefix + "rooms" }

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// unavailable wraps a failure to run a command. The caller's context error
// stays in the chain so that callers can tell a cancelled request; the
// client's own errors do not (never a rueidis.Nil to test for).
func unavailable(op, room string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("redisqueue: %s %s: %w: %w", op, room, queue.ErrUnavailable, err)
	}
	return fmt.Errorf("redisqueue: %s %s: %w: %v", op, room, queue.ErrUnavailable, err)
}

func notFound(op, room string) error {
	return fmt.Errorf("redisqueue: %s %s: %w", op, room, queue.ErrRoomNotFound)
}

// exec runs a room's script with keys, the last of which is the room's
// guard key.
func (s *Store) exec(ctx context.Context, script *rueidis.Lua, keys, args []string) rueidis.RedisResult {
	return redisscript.Exec(ctx, s.c, script, keys, args)
}

// The guard key (roomKeys.guard) is a key of the room's slot that is never
// written. Every script declares it, last, so that Redis Cluster never runs a room's script while
// the room's slot migrates: the source refuses a script with a declared key
// it does not have (ASK), the target one with a declared key it does not
// have yet (TRYAGAIN), and the guard is on neither. Without it, a script
// could run on the source while the slot migrates and stop half-way, its
// first writes done, at the first key that is not there (one MIGRATE has
// moved, or one the script itself emptied): Redis fails "Script attempted
// to access a non local key" at that command, not before the script. exec
// retries the TRYAGAIN until the slot has moved.

// run runs a room's script and returns its array reply.
func (s *Store) run(ctx context.Context, op string, script *rueidis.Lua, room string, args ...string) ([]rueidis.RedisMessage, error) {
	arr, err := s.exec(ctx, script, s.keys(room), args).ToArray()
	if err != nil {
		return nil, unavailable(op, room, err)
	}
	return arr, nil
}

// runInts runs a room's script whose reply is a non-empty array of
// integers.
func (s *Store) runInts(ctx context.Context, op string, script *rueidis.Lua, room string, args ...string) ([]int64, error) {
	arr, err := s.run(ctx, op, script, room, args...)
	if err != nil {
		return nil, err
	}
	r, err := ints(arr)
	if err != nil || len(r) == 0 {
		return nil, unavailable(op, room, fmt.Errorf("unexpected reply %v (%v)", arr, err))
	}
	return r, nil
}

// ints reads the integers of a script reply.
func ints(arr []rueidis.RedisMessage) ([]int64, error) {
	out := make([]int64, len(arr))
	for i := range arr {
		n, err := arr[i].AsInt64()
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// PutRoom implements queue.Store: it runs put_room.lua, then lists the
// room (a separate command: the rooms set is outside the room's slot; a
// retry repairs a failure between).
func (s *Store) PutRoom(ctx context.Context, room string, set queue.Settings, o queue.PutOptions) (bool, error) {
	op, onlyCreate := "put room", "0"
	if o.OnlyCreate {
		op, onlyCreate = "create room", "1"
	}
	fields := queue.SettingFields()
	args := make([]string, 0, 4+2*len(fields))
	seed, commitment := "", ""
	if !set.OpensAt.IsZero() {
		b := queue.NewSeed()
		seed, commitment = hex.EncodeToString(b), queue.Commitment(b)
	}
	args = append(args, onlyCreate, strconv.FormatInt(set.Batch(), 10), seed, commitment)
	for _, f := range fields {
		args = append(args, f.Name, f.Encode(set))
	}
	keys := s.keys(room).with(1)
	if s.exclusive != nil {
		keys = s.keys(room).with(1, s.exclusive(room))
	}
	created, err := s.exec(ctx, s.putRoomScript, keys, args).AsInt64()
	switch {
	case err != nil:
		return false, unavailable(op, room, err)
	case created == -2:
		return false, fmt.Errorf("redisqueue: %s %s: %w", op, room, queue.ErrShardsFixed)
	case created < 0:
		return false, fmt.Errorf("redisqueue: %s %s: %w", op, room, queue.ErrDrawn)
	}
	if err := s.c.Do(ctx, s.c.B().Sadd().Key(s.roomsKey()).Member(room).Build()).Error(); err != nil {
		return false, unavailable(op, room, err)
	}
	if created == 1 || !o.OnlyCreate {
		s.refreshAfter(ctx, room)
	}
	return created == 1, nil
}

// Rooms implements queue.Store.
func (s *Store) Rooms(ctx context.Context) ([]string, error) {
	rooms, err := s.c.Do(ctx, s.c.B().Smembers().Key(s.roomsKey()).Build()).AsStrSlice()
	if err != nil {
		return nil, unavailable("rooms", "", err)
	}
	slices.Sort(rooms)
	return rooms, nil
}

// Enter implements queue.Store. A lane code's uses are counted in
// <prefix>{room}:lanecode:<id>, which expires with the code.
func (s *Store) Enter(ctx context.Context, room, visitor string, now time.Time, o queue.EnterOptions) (queue.Entry, bool, error) {
	if o.Lane == nil {
		return s.enterIn(ctx, "enter", room, visitor, now, s.keys(room))
	}
	code := *o.Lane
	keys := s.keys(room).with(8, s.prefix+"{"+room+"}:lanecode:"+code.ID)
	return s.enterIn(ctx, "enter lane", room, visitor, now, keys, strconv.FormatInt(code.Uses, 10), ms(code.ExpiresAt))
}

// enterIn runs enter.lua with keys and, after the draw's, the lane's
// arguments (none for the main line).
func (s *Store) enterIn(ctx context.Context, op, room, visitor string, now time.Time, keys []string, lane ...string) (queue.Entry, bool, error) {
	r, err := s.withKey(ctx, op, room, visitor, func(key, commitment string) ([]int64, error) {
		arr, err := s.execAck(ctx, s.enter, keys, append([]string{visitor, ms(now), key, commitment, strconv.FormatFloat(rand.Float64(), 'g', -1, 64)}, lane...)).ToArray()
		if err != nil {
			return nil, unavailable(op, room, err)
		}
		r, err := ints(arr)
		if err != nil || len(r) == 0 {
			return nil, unavailable(op, room, fmt.Errorf("unexpected reply %v (%v)", arr, err))
		}
		return r, nil
	})
	if err != nil {
		return queue.Entry{}, false, err
	}
	switch r[0] {
	case kindNotFound:
		return queue.Entry{}, false, notFound(op, room)
	case kindClosed:
		return queue.Entry{}, false, fmt.Errorf("redisqueue: %s %s: %w", op, room, queue.ErrRoomClosed)
	case kindFull:
		return queue.Entry{}, false, fmt.Errorf("redisqueue: %s %s: %w", op, room, queue.ErrQueueFull)
	case kindLaneUsed:
		return queue.Entry{}, false, fmt.Errorf("redisqueue: %s %s: %w", op, room, queue.ErrLaneCodeUsed)
	case kindLanesOff:
		return queue.Entry{}, false, fmt.Errorf("redisqueue: %s %s: %w", op, room, queue.ErrLanesOff)
	}
	e, err := entry(visitor, r)
	if err != nil || len(r) < 5 {
		return queue.Entry{}, false, unavailable(op, room, fmt.Errorf("unexpected reply %v", r))
	}
	return e, r[4] == 1, nil
}

// entry decodes {kind, seq, position, expires_ms} from enter.lua or status.lua.
func entry(visitor string, r []int64) (queue.Entry, error) {
	switch {
	case r[0] == kindGone:
		return queue.Entry{Visitor: visitor, Status: queue.Gone}, nil
	case len(r) < 4:
	case r[0] == kindWaiting:
		return queue.Entry{Visitor: visitor, Status: queue.Waiting, Seq: r[1], Position: r[2]}, nil
	case r[0] == kindActive:
		return queue.Entry{Visitor: visitor, Status: queue.Active, Seq: r[1], ExpiresAt: time.UnixMilli(r[3]).UTC()}, nil
	}
	return queue.Entry{}, fmt.Errorf("unexpected reply %v", r)
}

// Status implements queue.Store.
func (s *Store) Status(ctx context.Context, room, visitor string, now time.Time) (queue.Entry, error) {
	r, err := s.withKey(ctx, "status", room, visitor, func(key, commitment string) ([]int64, error) {
		return s.runInts(ctx, "status", s.status, room, visitor, ms(now), key, commitment)
	})
	if err != nil {
		return queue.Entry{}, err
	}
	switch r[0] {
	case kindNotFound:
		return queue.Entry{}, notFound("status", room)
	}
	e, err := entry(visitor, r)
	if err != nil {
		return queue.Entry{}, unavailable("status", room, err)
	}
	// An admission whose step failed its WAIT may be on this primary only:
	// a pass is issued only once a replica has it too.
	if e.Status == queue.Active && s.ack.Replicas > 0 {
		if err := s.acks.wait(ctx); err != nil {
			return queue.Entry{}, unavailable("status", room, err)
		}
	}
	return e, nil
}

// Leave implements queue.Store.
func (s *Store) Leave(ctx context.Context, room, visitor string) error {
	r, err := s.withKey(ctx, "leave", room, visitor, func(key, commitment string) ([]int64, error) {
		n, err := s.execAck(ctx, s.leave, s.keys(room), []string{visitor, key, commitment}).AsInt64()
		if err != nil {
			return nil, unavailable("leave", room, err)
		}
		return []int64{n}, nil
	})
	if err != nil {
		return err
	}
	switch r[0] {
	case 0:
		return notFound("leave", room)
	}
	return nil
}

// Admit implements queue.Store. On limits older than their inputs it
// stores them anew (RefreshLimits) and steps again. A step that admitted
// someone is acknowledged as Ack says.
func (s *Store) Admit(ctx context.Context, room string, now time.Time) (queue.AdmitResult, error) {
	var arr []rueidis.RedisMessage
	for try := 0; ; try++ {
		var err error
		if arr, err = s.run(ctx, "admit", s.admit, room, ms(now)); err != nil {
			return queue.AdmitResult{}, err
		}
		if len(arr) != 1 || try == maxRefresh {
			break
		}
		if err := s.RefreshLimits(ctx, room); err != nil {
			return queue.AdmitResult{}, err
		}
	}
	if len(arr) == 0 {
		return queue.AdmitResult{}, notFound("admit", room)
	}
	counts, err := ints(arr[:min(3, len(arr))])
	if err != nil || len(counts) < 3 {
		return queue.AdmitResult{}, unavailable("admit", room, fmt.Errorf("unexpected reply %v (%v)", arr, err))
	}
	res := queue.AdmitResult{Expired: counts[0], Skipped: counts[1], Abandoned: counts[2]}
	if len(arr) > 3 {
		res.Admitted = make([]string, len(arr)-3)
		for i := range res.Admitted {
			if res.Admitted[i], err = arr[i+3].ToString(); err != nil {
				return queue.AdmitResult{}, unavailable("admit", room, err)
			}
		}
	}
	// A step that admitted nobody has nothing a failover must keep.
	if len(res.Admitted) > 0 && s.ack.Replicas > 0 {
		if err := s.acks.wait(ctx); err != nil {
			return queue.AdmitResult{}, unavailable("admit", room, err)
		}
	}
	return res, nil
}

// SetInventory implements queue.Store.
func (s *Store) SetInventory(ctx context.Context, room string, units int64) error {
	if err := s.hash.SetInventory(ctx, s.keys(room).with(1), units); err != nil {
		return hashError("set inventory", room, err)
	}
	s.refreshAfter(ctx, room)
	return nil
}

// maxRefresh bounds the tries of RefreshLimits, and Admit's steps over
// limits it found older than their inputs: each try fails only because
// another input was written since, whose writer stores the limits too.
const maxRefresh = 3

// RefreshLimits stores the room's queue.Limits computed from what its hash
// holds (limits.lua). Each write of an input calls it; a step that finds
// limits older than their inputs (a writer that stopped in between) calls
// it too.
func (s *Store) RefreshLimits(ctx context.Context, room string) error {
	for range maxRefresh {
		arr, err := s.run(ctx, "refresh limits", s.stats, room, "0")
		if err != nil {
			return err
		}
		if len(arr) == 0 {
			return notFound("refresh limits", room)
		}
		st, hash, err := parseStats(arr)
		if err != nil {
			return unavailable("refresh limits", room, err)
		}
		if stored, err := s.storeLimits(ctx, room, hash, st); stored || err != nil {
			return err
		}
	}
	return nil // inputs keep changing: their writers store the limits
}

// storeLimits stores the limits of st, read with the room's hash; false
// when an input was written since.
func (s *Store) storeLimits(ctx context.Context, room string, hash map[string]string, st queue.Stats) (bool, error) {
	stored, err := s.hash.StoreLimits(ctx, s.keys(room).with(1), hash, st.Settings.Limits(st.Control, st.Inventory))
	if err != nil {
		return false, hashError("refresh limits", room, err)
	}
	return stored, nil
}

// hashError is an error of redisroom's as this store's.
func hashError(op, room string, err error) error {
	if errors.Is(err, redisroom.ErrNoRoom) {
		return notFound(op, room)
	}
	return unavailable(op, room, err)
}

// refreshAfter stores the limits after a write of one of their inputs. An
// error leaves them marked older than their inputs, which the next step
// repairs (Admit); until then the room makes no passthrough.
func (s *Store) refreshAfter(ctx context.Context, room string) { _ = s.RefreshLimits(ctx, room) }

// Stats implements queue.Store.
func (s *Store) Stats(ctx context.Context, room string, now time.Time) (queue.Stats, error) {
	arr, err := s.run(ctx, "stats", s.stats, room, ms(now))
	if err != nil {
		return queue.Stats{}, err
	}
	if len(arr) == 0 {
		return queue.Stats{}, notFound("stats", room)
	}
	st, hash, err := parseStats(arr)
	if err != nil {
		return queue.Stats{}, unavailable("stats", room, err)
	}
	st.Since = s.since(ctx, now)
	if redisroom.Stale(hash) { // a writer stopped in between, or an older version's room
		_, _ = s.storeLimits(ctx, room, hash, st)
	}
	// A visitor's calls need its draw key only while the draw is pending:
	// before it, and while drawn entrants remain in the pre-queue. Then
	// the scripts never ask for it again (a room draws once), so the
	// cache lets the seed go and calls stop computing keys.
	switch {
	case st.Draw.Seed == nil:
	case !st.Draw.Done || field(arr, "pre_queue") != "0":
		s.cacheSeed(room, hex.EncodeToString(st.Draw.Seed))
	default:
		s.seeds.Delete(room)
	}
	return st, nil
}

// signalKeys are the keys of the scripts that touch the signal pool: the
// meta hash and the pool. The pool's fields name hist buckets; before they
// did, a pool of 128 other buckets lived at "{room}:signals", which no
// version reads the other's of during a rolling upgrade (each pools its own
// instances' samples) and DeleteRoom still removes.
func (s *Store) signalKeys(room string) []string {
	return s.keys(room).with(1, s.prefix+"{"+room+"}:signals2")
}

// AddSignals implements queue.ControlStore.
func (s *Store) AddSignals(ctx context.Context, room string, sig queue.Signals) (queue.Signals, error) {
	pool, err := s.hash.AddSignals(ctx, s.signalKeys(room), sig)
	if err != nil {
		return queue.Signals{}, hashError("add signals", room, err)
	}
	return pool, nil
}

// SetControl implements queue.ControlStore.
func (s *Store) SetControl(ctx context.Context, room string, next queue.Control, used queue.Signals) (bool, error) {
	stored, err := s.hash.SetControl(ctx, s.signalKeys(room), next, used)
	if err != nil {
		return false, hashError("set control", room, err)
	}
	if stored {
		s.refreshAfter(ctx, room)
	}
	return stored, nil
}

// field is the value of name in a reply of name/value pairs ("0" when
// missing).
func field(arr []rueidis.RedisMessage, name string) string {
	for i := 0; i+1 < len(arr); i += 2 {
		if n, err := arr[i].ToString(); err == nil && n == name {
			if v, err := str(arr[i+1]); err == nil {
				return v
			}
		}
	}
	return "0"
}

// parseStats decodes stats.lua's reply, name/value pairs, and returns
// them by name too. Settings are read by their queue.SettingFields names;
// one missing from the hash (a room written before the setting existed)
// keeps its default.
func parseStats(arr []rueidis.RedisMessage) (queue.Stats, map[string]string, error) {
	if len(arr)%2 != 0 {
		return queue.Stats{}, nil, fmt.Errorf("unexpected reply of %d values", len(arr))
	}
	named := make(map[string]string, len(arr)/2)
	for i := 0; i < len(arr); i += 2 {
		name, err := arr[i].ToString()
		if err != nil {
			return queue.Stats{}, nil, err
		}
		if named[name], err = str(arr[i+1]); err != nil {
			return queue.Stats{}, nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	set, err := queue.DecodeSettings(named)
	if err != nil {
		return queue.Stats{}, nil, err
	}
	st := queue.Stats{Settings: set}
	for _, c := range []struct {
		name string
		n    *int64
	}{
		{"seq", &st.LastSeq},
		{"admitted_total", &st.AdmittedTotal},
		{"waiting", &st.Waiting},
		{"lane", &st.Lane},
		{"active", &st.Active},
		{"head_seq", &st.HeadSeq},
		{"pre_queue", &st.Draw.Entrants},
	} {
		var err error
		if *c.n, err = strconv.ParseInt(named[c.name], 10, 64); err != nil {
			return queue.Stats{}, nil, fmt.Errorf("%s: %w", c.name, err)
		}
	}
	for _, f := range queue.ControlFields() {
		if v, ok := named[f.Name]; ok {
			if err := f.Decode(&st.Control, v); err != nil {
				return queue.Stats{}, nil, fmt.Errorf("%s: %w", f.Name, err)
			}
		}
	}
	if st.HeadSeq < 0 {
		st.HeadSeq = st.LastSeq + 1
	}
	if h, ok := named["draw_seed"]; ok {
		seed, err := hex.DecodeString(h)
		if err != nil || len(seed) != queue.SeedSize {
			return queue.Stats{}, nil, fmt.Errorf("draw_seed: want %d bytes in hex", queue.SeedSize)
		}
		st.Draw.Seed = seed
	}
	if v, ok := named["inventory"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return queue.Stats{}, nil, fmt.Errorf("inventory: %w", err)
		}
		st.Inventory = queue.Inventory{Units: n, Known: true}
	}
	if wi, ok := named["win_i"]; ok {
		st.Window.Index, _ = strconv.ParseInt(wi, 10, 64)
		st.Window.Seq, _ = strconv.ParseInt(named["win_seq"], 10, 64)
	}
	if named["drawn"] == "1" {
		st.Draw.Done = true
		var err error
		if st.Draw.Entrants, err = strconv.ParseInt(named["draw_entrants"], 10, 64); err != nil {
			return queue.Stats{}, nil, fmt.Errorf("draw_entrants: %w", err)
		}
	}
	return st, named, nil
}

// str reads a string or integer reply as a string.
func str(m rueidis.RedisMessage) (string, error) {
	if n, err := m.ToInt64(); err == nil {
		return strconv.FormatInt(n, 10), nil
	}
	return m.ToString()
}

// DeleteRoom implements queue.Store: the room's keys go in one script, then
// its member of the rooms set (also when the room was already gone, so a
// retry repairs a failure between the two).
func (s *Store) DeleteRoom(ctx context.Context, room string, force bool, now time.Time) error {
	f := "0"
	if force {
		f = "1"
	}
	// and the controller's signal pool, and the pool of versions before hist
	keys := s.keys(room).with(8, s.signalKeys(room)[1], s.prefix+"{"+room+"}:signals")
	r, err := s.exec(ctx, s.deleteRoom, keys, []string{f, ms(now)}).AsInt64()
	if err != nil {
		return unavailable("delete room", room, err)
	}
	if r == 0 {
		return fmt.Errorf("redisqueue: delete room %s: %w", room, queue.ErrRoomInUse)
	}
	if err := s.c.Do(ctx, s.c.B().Srem().Key(s.roomsKey()).Member(room).Build()).Error(); err != nil {
		return unavailable("delete room", room, err)
	}
	s.seeds.Delete(room)
	if _, ok := s.roomKeys.LoadAndDelete(room); ok {
		s.keyRooms.Add(-1)
	}
	if r < 0 {
		return notFound("delete room", room)
	}
	return nil
}
