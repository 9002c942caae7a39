// Package redisroom keeps what both Redis queue stores (redisqueue,
// redisshard) keep alike in a room's Redis hash: the inventory, the
// queue.Limits stored beside their inputs (docs/architecture.md#admission-rules),
// and the adaptive controller's state with its signal pool. Each call takes
// the room's keys as its scripts declare them: the hash, the signal pool
// where it says so, and the slot's guard key last (redisscript.Exec). It
// returns ErrNoRoom when the hash holds no room, else the client's error
// as it is: the stores name the operation and wrap it.
package redisroom

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"strconv"

	"github.com/redis/rueidis"

	"usher/internal/queue"
	"usher/internal/redisscript"
)

var (
	//go:embed set_inventory.lua
	setInventoryLua string
	//go:embed set_limits.lua
	setLimitsLua string
	//go:embed signals.lua
	signalsLua string
	//go:embed set_control.lua
	setControlLua string
)

// ControlAfreshLua defines control_afresh, which the stores' put_room.lua
// call: a room switched to adaptive admission starts its controller
// afresh.
//
//go:embed control_afresh.lua
var ControlAfreshLua string

// ErrNoRoom: the hash holds no room.
var ErrNoRoom = errors.New("no such room")

// Scripts runs the scripts on the server behind a client.
type Scripts struct {
	c                                            rueidis.Client
	setInventory, setLimits, signals, setControl *rueidis.Lua
}

// New returns the scripts on c.
func New(c rueidis.Client) *Scripts {
	return &Scripts{
		c:            c,
		setInventory: rueidis.NewLuaScript(setInventoryLua),
		setLimits:    rueidis.NewLuaScript(setLimitsLua),
		signals:      rueidis.NewLuaScript(signalsLua),
		setControl:   rueidis.NewLuaScript(setControlLua),
	}
}

// SetInventory records the units the room's sale has left (keys: hash,
// guard).
func (s *Scripts) SetInventory(ctx context.Context, keys []string, units int64) error {
	ok, err := redisscript.Exec(ctx, s.c, s.setInventory, keys, []string{strconv.FormatInt(units, 10)}).AsInt64()
	if err == nil && ok == 0 {
		err = ErrNoRoom
	}
	return err
}

// StoreLimits stores lim, computed from hash, the room's hash as read by
// name; false when an input was written since (keys: hash, guard).
func (s *Scripts) StoreLimits(ctx context.Context, keys []string, hash map[string]string, lim queue.Limits) (bool, error) {
	args := append([]string{rulesVersion(hash)}, lim.LimitFields()...)
	r, err := redisscript.Exec(ctx, s.c, s.setLimits, keys, args).AsInt64()
	if err == nil && r < 0 {
		err = ErrNoRoom
	}
	return r == 1, err
}

// Stale reports whether hash, a room's hash read by name, holds limits
// older than their inputs, or none (a room written before they existed).
func Stale(hash map[string]string) bool {
	v, ok := hash["lim_v"]
	return !ok || v != rulesVersion(hash)
}

// rulesVersion is the hash's rules_v, "0" when it has none.
func rulesVersion(hash map[string]string) string { return cmp.Or(hash["rules_v"], "0") }

// AddSignals adds sig to the room's pool and returns the pool (keys: hash,
// pool, guard).
func (s *Scripts) AddSignals(ctx context.Context, keys []string, sig queue.Signals) (queue.Signals, error) {
	arr, err := redisscript.Exec(ctx, s.c, s.signals, keys, sig.SignalPairs()).ToArray()
	if err != nil {
		return queue.Signals{}, err
	}
	if len(arr) == 0 {
		return queue.Signals{}, ErrNoRoom
	}
	var pool queue.Signals
	for i := 0; i+1 < len(arr); i += 2 {
		name, err := arr[i].ToString()
		if err != nil {
			return queue.Signals{}, err
		}
		v, err := arr[i+1].ToString()
		if err != nil {
			return queue.Signals{}, err
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return queue.Signals{}, err
		}
		pool.SetSignal(name, n)
	}
	return pool, nil
}

// SetControl stores next over the state of version next.Version-1 and
// takes used out of the pool; false when another step came first (keys:
// hash, pool, guard).
func (s *Scripts) SetControl(ctx context.Context, keys []string, next queue.Control, used queue.Signals) (bool, error) {
	fields := queue.ControlFields()
	args := []string{strconv.FormatInt(next.Version-1, 10), strconv.Itoa(len(fields))}
	for _, f := range fields {
		args = append(args, f.Name, f.Encode(next))
	}
	args = append(args, used.SignalPairs()...)
	r, err := redisscript.Exec(ctx, s.c, s.setControl, keys, args).AsInt64()
	if err == nil && r < 0 {
		err = ErrNoRoom
	}
	return r == 1, err
}
