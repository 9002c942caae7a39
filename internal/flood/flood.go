// Package flood decides whether a client may take a new queue place: the
// one thing a waiting room gives away for free, and so the thing a bot
// floods. Every entry into a room asks it (gate.Door), whatever cookies it
// carries, unless it shows a ticket for its own place.
//
// Layers, each a room setting (queue.Settings):
//   - ClientEntersPerMinute: a per-client rate of new places (package limit,
//     keyed by room and clientip key), held across instances by the store;
//     over it, ErrRateLimited with a retry time, and no place is made.
//   - PowBits: a proof of work (package pow), one solution per place: asked
//     of the API's entries and of the proxy's page views alike (the waiting
//     page solves it in a Web Worker).
package flood

import (
	"context"
	"net/http"
	"time"

	"usher/internal/clientip"
	"usher/internal/fault"
	"usher/internal/limit"
	"usher/internal/pow"
	"usher/internal/queue"
)

// ErrRateLimited is the answer to a client over its room's
// ClientEntersPerMinute.
var ErrRateLimited = fault.New(fault.RateLimited, "too many new places for this network; retry later")

// LimitedError is ErrRateLimited with the time until a new place would be
// allowed.
type LimitedError struct{ RetryAfter time.Duration }

func (e *LimitedError) Error() string { return ErrRateLimited.Error() }

// Unwrap makes errors.Is(err, ErrRateLimited) hold.
func (e *LimitedError) Unwrap() error { return ErrRateLimited }

// FaultRetryAfter puts the wait in the answer's Retry-After (fault.Delayed).
func (e *LimitedError) FaultRetryAfter() time.Duration { return e.RetryAfter }

// Guard asks the layers. Its zero value is not usable; use New.
type Guard struct {
	limits  limit.Store
	pow     *pow.Guard
	trusted clientip.Trusted
	now     func() time.Time
}

// New returns a guard that counts in limits, checks proofs of work with p,
// and keys clients through trusted proxies.
func New(limits limit.Store, p *pow.Guard, trusted clientip.Trusted, now func() time.Time) *Guard {
	return &Guard{limits: limits, pow: p, trusted: trusted, now: now}
}

// NewPlace reports whether the client of r may take a new place in room
// with settings s. A room with PowBits asks the proof of work: a request
// without a solution (the Usher-Challenge header) gets a new challenge and
// is not counted; one with a solution is counted by the per-client limit
// first, then its solution is checked and spent. Errors:
// a *pow.RequiredError carrying a new challenge, pow.ErrInvalid,
// a *LimitedError, or limit.ErrUnavailable when the store cannot count.
func (g *Guard) NewPlace(ctx context.Context, r *http.Request, room string, s queue.Settings) error {
	solution := r.Header.Get(pow.Header)
	if s.PowBits > 0 && solution == "" {
		return &pow.RequiredError{Challenge: g.pow.Issue(room, int(s.PowBits))}
	}
	if s.ClientEntersPerMinute > 0 {
		ok, retry, err := g.limits.Allow(ctx, "enter:"+room+":"+g.trusted.Key(r),
			limit.Rate{Events: s.ClientEntersPerMinute, Per: time.Minute}, g.now())
		if err != nil {
			return err
		}
		if !ok {
			return &LimitedError{RetryAfter: retry}
		}
	}
	if s.PowBits > 0 {
		return g.pow.Check(ctx, room, int(s.PowBits), solution)
	}
	return nil
}
