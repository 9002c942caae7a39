// Package redishold is the hold.Store on Redis: the backend for several usher
// instances sharing holds. A scope's keys share one hash tag, so a scope
// lives in one Redis Cluster slot, and each method is one Lua script
// (lua/*.lua): atomic however many instances share the server. A call that
// fails with hold.ErrUnavailable (a timeout, a broken connection) may still
// have run.
//
// A hold is live while its expiry, by the caller's clock, is after now;
// Redis's own key expiry only collects garbage, GCMargin after a hold ends.
//
// Limits: if the callers' clocks run more than GCMargin behind Redis's, a
// seat key can vanish before its hold ends and the seat be held twice (SQL
// still sells it once). Times have millisecond resolution; the scripts need
// Redis 2.6.12 (SET … PX) and are tested on 7.0. Keys and clocks:
// docs/architecture.md#the-hold-store.
package redishold

import (
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/hold"
	"usher/internal/redisscript"
)

var _ hold.Store = (*Store)(nil)

var (
	//go:embed lua/common.lua
	commonLua string
	//go:embed lua/hold_seats.lua
	holdSeatsLua string
	//go:embed lua/hold_stock.lua
	holdStockLua string
	//go:embed lua/get.lua
	getLua string
	//go:embed lua/find.lua
	findLua string
	//go:embed lua/end.lua
	endLua string
	//go:embed lua/held_seats.lua
	heldSeatsLua string
	//go:embed lua/stock.lua
	stockLua string
	//go:embed lua/set_stock.lua
	setStockLua string
	//go:embed lua/lapsed.lua
	lapsedLua string
)

// GCMargin is how long after a hold's expiry Redis may drop its keys by
// itself (PX) when no call reclaims them first.
const GCMargin = 10 * time.Minute

// Results of hold_seats.lua and hold_stock.lua.
const (
	resultHeld    = 0
	resultTaken   = 1
	resultLimit   = 2
	resultSoldOut = 3
)

// Store is a hold.Store on Redis. It is safe for concurrent use; concurrent
// calls share the client's connections through rueidis' auto-pipelining.
//
// A call right after many of a scope's holds expired reclaims them all in
// one script. Scripts that end holds touch seat keys they do not declare:
// Redis Cluster accepts that, a proxy that demands every key in KEYS would
// not.
type Store struct {
	c      rueidis.Client
	prefix string

	holdSeats, holdStock, get, find, end, heldSeats, stock, setStock, lapsed *rueidis.Lua
}

// New returns a store that keeps its keys under prefix (usher uses "usher:")
// on the server behind c. Several stores with different prefixes may share a
// server. The caller owns c and closes it after the last call.
func New(c rueidis.Client, prefix string) *Store {
	script := func(body string) *rueidis.Lua { return rueidis.NewLuaScript(commonLua + "\n" + body) }
	return &Store{
		c:         c,
		prefix:    prefix,
		holdSeats: script(holdSeatsLua),
		holdStock: script(holdStockLua),
		get:       script(getLua),
		find:      script(findLua),
		end:       script(endLua),
		heldSeats: script(heldSeatsLua),
		stock:     script(stockLua),
		setStock:  rueidis.NewLuaScript(setStockLua),
		lapsed:    script(lapsedLua),
	}
}

// base is the start of every key of scope.
func (s *Store) base(scope string) string { return s.prefix + "{" + scope + "}:" }

// keys returns the scope's four fixed keys and its guard key (common.lua's
// KEYS[1..5]) with room for extra more.
//
// The guard, <prefix>{<scope>}:guard, is never written. Every script
// declares it so that Redis Cluster never runs a scope's script while the
// scope's slot migrates: the source refuses a script with a declared key it
// does not have (ASK), the target one with a declared key it does not have
// yet (TRYAGAIN), and the guard is on neither. Without it, a script could
// run on the source while the slot migrates and stop half-way, its first
// writes done, at the first key that is not there: a seat key that a
// MIGRATE has moved (the seat keys of the holds a script ends are not
// declared) or a hash the script itself emptied. exec retries the TRYAGAIN
// until the slot has moved.
func (s *Store) keys(scope string, extra int) []string {
	base := s.base(scope)
	return append(make([]string, 0, 5+extra), base+"stock", base+"holds", base+"hold", base+"held", base+"guard")
}

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// expiry returns the hold's expiry in unix ms and the PX of its keys.
func expiry(now time.Time, ttl time.Duration) (exp int64, px string) {
	exp = now.UnixMilli() + ttl.Milliseconds()
	return exp, strconv.FormatInt(max(1, (ttl+GCMargin).Milliseconds()), 10)
}

// unavailable wraps a failure to run a script. The caller's context error
// stays in the chain so that callers can tell a cancelled request; the
// client's own errors do not (never a rueidis.Nil to test for).
func unavailable(op, scope string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("redishold: %s %s: %w: %w", op, scope, hold.ErrUnavailable, err)
	}
	return fmt.Errorf("redishold: %s %s: %w: %v", op, scope, hold.ErrUnavailable, err)
}

func notFound(op, scope, id string) error {
	return fmt.Errorf("redishold: %s %s/%s: %w", op, scope, id, hold.ErrNotFound)
}

// HoldSeats implements hold.Store.
func (s *Store) HoldSeats(ctx context.Context, scope, holder string, seats []string, limit int, ttl time.Duration, now time.Time) (hold.Hold, error) {
	const op = "hold seats"
	id := rand.Text()
	exp, px := expiry(now, ttl)
	keys := s.keys(scope, len(seats))
	base := s.base(scope)
	for _, seat := range seats {
		keys = append(keys, base+"seat:"+seat)
	}
	args := append(make([]string, 0, 7+len(seats)),
		base, ms(now), id, holder, strconv.Itoa(limit), strconv.FormatInt(exp, 10), px)
	args = append(args, seats...)
	arr, err := redisscript.Exec(ctx, s.c, s.holdSeats, keys, args).ToArray()
	if err != nil {
		return hold.Hold{}, unavailable(op, scope, err)
	}
	result, err := resultOf(arr)
	if err != nil {
		return hold.Hold{}, unavailable(op, scope, err)
	}
	switch result {
	case resultHeld:
		return hold.Hold{
			ID:        id,
			Scope:     scope,
			Holder:    holder,
			Seats:     append([]string(nil), seats...),
			ExpiresAt: time.UnixMilli(exp).UTC(),
		}, nil
	case resultTaken:
		taken := make([]string, len(arr)-1)
		for i := range taken {
			if taken[i], err = arr[i+1].ToString(); err != nil {
				return hold.Hold{}, unavailable(op, scope, err)
			}
		}
		return hold.Hold{}, fmt.Errorf("redishold: %s %s: %w", op, scope, &hold.TakenError{Seats: taken})
	case resultLimit:
		return hold.Hold{}, fmt.Errorf("redishold: %s %s: %s wants %d more, limit %d: %w", op, scope, holder, len(seats), limit, hold.ErrLimit)
	}
	return hold.Hold{}, unavailable(op, scope, fmt.Errorf("unexpected result %d", result))
}

// HoldStock implements hold.Store.
func (s *Store) HoldStock(ctx context.Context, scope, holder string, n, limit int64, ttl time.Duration, now time.Time) (hold.Hold, error) {
	const op = "hold stock"
	id := rand.Text()
	exp, px := expiry(now, ttl)
	args := []string{s.base(scope), ms(now), id, holder,
		strconv.FormatInt(n, 10), strconv.FormatInt(limit, 10), strconv.FormatInt(exp, 10), px}
	arr, err := redisscript.Exec(ctx, s.c, s.holdStock, s.keys(scope, 0), args).ToArray()
	if err != nil {
		return hold.Hold{}, unavailable(op, scope, err)
	}
	result, err := resultOf(arr)
	if err != nil {
		return hold.Hold{}, unavailable(op, scope, err)
	}
	switch result {
	case resultHeld:
		return hold.Hold{ID: id, Scope: scope, Holder: holder, Quantity: n, ExpiresAt: time.UnixMilli(exp).UTC()}, nil
	case resultLimit:
		return hold.Hold{}, fmt.Errorf("redishold: %s %s: %s wants %d more, limit %d: %w", op, scope, holder, n, limit, hold.ErrLimit)
	case resultSoldOut:
		return hold.Hold{}, fmt.Errorf("redishold: %s %s: %d wanted: %w", op, scope, n, hold.ErrSoldOut)
	}
	return hold.Hold{}, unavailable(op, scope, fmt.Errorf("unexpected result %d", result))
}

func resultOf(arr []rueidis.RedisMessage) (int64, error) {
	if len(arr) == 0 {
		return 0, errors.New("empty reply")
	}
	return arr[0].AsInt64()
}

// Get implements hold.Store.
func (s *Store) Get(ctx context.Context, scope, id string, now time.Time) (hold.Hold, error) {
	rec, err := redisscript.Exec(ctx, s.c, s.get, s.keys(scope, 0), []string{s.base(scope), ms(now), id}).ToString()
	if rueidis.IsRedisNil(err) {
		return hold.Hold{}, notFound("get", scope, id)
	}
	if err != nil {
		return hold.Hold{}, unavailable("get", scope, err)
	}
	h, err := parseRecord(rec)
	if err != nil {
		return hold.Hold{}, unavailable("get", scope, err)
	}
	h.ID, h.Scope = id, scope
	return h, nil
}

// Find implements hold.Store.
func (s *Store) Find(ctx context.Context, scope, seat string, now time.Time) (hold.Hold, error) {
	arr, err := redisscript.Exec(ctx, s.c, s.find, s.keys(scope, 0), []string{s.base(scope), ms(now), seat}).ToArray()
	if rueidis.IsRedisNil(err) {
		return hold.Hold{}, notFound("find", scope, seat)
	}
	if err != nil {
		return hold.Hold{}, unavailable("find", scope, err)
	}
	if len(arr) != 2 {
		return hold.Hold{}, unavailable("find", scope, fmt.Errorf("find answered %d values", len(arr)))
	}
	id, err1 := arr[0].ToString()
	rec, err2 := arr[1].ToString()
	if err := errors.Join(err1, err2); err != nil {
		return hold.Hold{}, unavailable("find", scope, err)
	}
	h, err := parseRecord(rec)
	if err != nil {
		return hold.Hold{}, unavailable("find", scope, err)
	}
	h.ID, h.Scope = id, scope
	return h, nil
}

// Lapsed implements hold.Store.
func (s *Store) Lapsed(ctx context.Context, scope string, now time.Time, max int) ([]hold.Hold, error) {
	if max <= 0 {
		return nil, nil
	}
	recs, err := redisscript.Exec(ctx, s.c, s.lapsed, s.keys(scope, 0), []string{s.base(scope), ms(now), strconv.Itoa(max)}).AsStrSlice()
	if err != nil {
		return nil, unavailable("lapsed", scope, err)
	}
	out := make([]hold.Hold, 0, len(recs))
	for _, rec := range recs {
		id, rest, _ := strings.Cut(rec, " ")
		h, err := parseRecord(rest)
		if err != nil {
			return out, unavailable("lapsed", scope, err) // the rest are gone: the store's record was bad
		}
		h.ID, h.Scope = id, scope
		out = append(out, h)
	}
	return out, nil
}

// parseRecord decodes "holder quantity expiry_ms seat…".
func parseRecord(rec string) (hold.Hold, error) {
	f := strings.Split(rec, " ")
	if len(f) < 3 {
		return hold.Hold{}, fmt.Errorf("bad hold record %q", rec)
	}
	qty, err1 := strconv.ParseInt(f[1], 10, 64)
	exp, err2 := strconv.ParseInt(f[2], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return hold.Hold{}, fmt.Errorf("bad hold record %q: %v", rec, err)
	}
	h := hold.Hold{Holder: f[0], Quantity: qty, ExpiresAt: time.UnixMilli(exp).UTC()}
	if len(f) > 3 {
		h.Seats = f[3:]
	}
	return h, nil
}

// Release implements hold.Store.
func (s *Store) Release(ctx context.Context, scope, id string, now time.Time) error {
	return s.endHold(ctx, "release", scope, id, now)
}

// Consume implements hold.Store.
func (s *Store) Consume(ctx context.Context, scope, id string, now time.Time) error {
	return s.endHold(ctx, "consume", scope, id, now)
}

func (s *Store) endHold(ctx context.Context, op, scope, id string, now time.Time) error {
	n, err := redisscript.Exec(ctx, s.c, s.end, s.keys(scope, 0), []string{s.base(scope), ms(now), id, op}).AsInt64()
	if err != nil {
		return unavailable(op, scope, err)
	}
	if n == 0 {
		return notFound(op, scope, id)
	}
	return nil
}

// HeldSeats implements hold.Store.
func (s *Store) HeldSeats(ctx context.Context, scope string, now time.Time) ([]string, error) {
	seats, err := redisscript.Exec(ctx, s.c, s.heldSeats, s.keys(scope, 0), []string{s.base(scope), ms(now)}).AsStrSlice()
	if err != nil {
		return nil, unavailable("held seats", scope, err)
	}
	return seats, nil
}

// SetStock implements hold.Store.
func (s *Store) SetStock(ctx context.Context, scope string, total int64) error {
	if err := redisscript.Exec(ctx, s.c, s.setStock, s.keys(scope, 0), []string{strconv.FormatInt(total, 10)}).Error(); err != nil {
		return unavailable("set stock", scope, err)
	}
	return nil
}

// Stock implements hold.Store.
func (s *Store) Stock(ctx context.Context, scope string, now time.Time) (int64, error) {
	n, err := redisscript.Exec(ctx, s.c, s.stock, s.keys(scope, 0), []string{s.base(scope), ms(now)}).AsInt64()
	if err != nil {
		return 0, unavailable("stock", scope, err)
	}
	return n, nil
}
