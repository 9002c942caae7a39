// Package limit bounds how often one client may do a thing that costs the
// server something a stranger can create: a new queue place, above all.
//
// A Store keeps, per key, one number: the generic cell rate algorithm's
// theoretical arrival time (GCRA, as in ATM networks and redis-cell). A rate
// of N events per period lets a client do N at once and then one every
// period/N; a refused event leaves no trace, so a client that keeps
// hammering is refused until it slows down, and never pushes its own window
// further out. A key costs O(1) memory and is forgotten once its client has
// been quiet for a period. The stores that live outside the process
// (redislimit) hold the limit across every instance that shares them.
package limit

import (
	"context"
	"fmt"
	"time"

	"usher/internal/fault"
)

var (
	// ErrInvalid is a rate or key out of range.
	ErrInvalid = fault.New(fault.Invalid, "invalid limit")
	// ErrUnavailable wraps any failure to reach the backend.
	ErrUnavailable = fault.New(fault.Unavailable, "limit store unavailable")
)

// Rate is Events per Per: a burst of Events, refilled evenly over Per.
type Rate struct {
	Events int64
	Per    time.Duration
}

// Validate reports a rate that no store can keep.
func (r Rate) Validate() error {
	if r.Events < 1 || r.Events > 1_000_000 || r.Per < time.Millisecond || r.Per > 24*time.Hour {
		return fmt.Errorf("%w: rate %d per %v: want 1 to 1000000 events per 1ms to 24h", ErrInvalid, r.Events, r.Per)
	}
	return nil
}

// Check validates a key and a rate, as every Store does first.
func Check(key string, r Rate) error {
	if key == "" || len(key) > MaxKey {
		return fmt.Errorf("%w: key of %d bytes: want 1 to %d", ErrInvalid, len(key), MaxKey)
	}
	return r.Validate()
}

// Interval is the time one event costs: Per / Events.
func (r Rate) Interval() time.Duration { return r.Per / time.Duration(r.Events) }

// MaxKey is the longest key in bytes.
const MaxKey = 200

// Store is a per-key rate limiter. Allow is one atomic operation: any number
// of concurrent callers, on any number of instances sharing the store,
// together get at most the rate.
type Store interface {
	// Allow records one event for key if it conforms to r at now: ok is true
	// and the event counted, or ok is false, nothing is recorded, and retry
	// is how long until an event would conform. now is the caller's clock.
	Allow(ctx context.Context, key string, r Rate, now time.Time) (ok bool, retry time.Duration, err error)
}

// Decide is the algorithm every store runs, on its own integer clock: tat is
// the key's theoretical arrival time (0 for an unknown key), now the
// current time, interval and burst from the rate. It returns whether the
// event conforms, the new tat to store if it does, and otherwise how long
// until it would.
func Decide(tat, now, interval, burst int64) (ok bool, newTAT, retry int64) {
	tat = max(tat, now)
	next := tat + interval
	if allowAt := next - burst*interval; allowAt > now {
		return false, 0, allowAt - now
	}
	return true, next, 0
}
