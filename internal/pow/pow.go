// Package pow makes an anonymous queue place cost the client some work:
// before it may enter a room that asks for proof of work, a client solves a
// hash puzzle (hashcash). An honest visitor pays it once, in the background
// while the page loads; a bot that wants ten thousand places pays it ten
// thousand times.
//
// Protocol (the JSON API documents it): an entry without a solution is
// answered with a challenge, {"token": "<opaque>", "bits": N}. The client
// finds a nonce such that SHA-256(token ":" nonce) starts with N zero bits
// (Solves) and retries with `Usher-Challenge: <token>:<nonce>`. A token is
// signed with the server's keys, names its room, lives TTL and is used once.
//
// Limits: the expected work is 2^N hashes, N = 16 about a second with
// WebCrypto in a phone's browser; verifying costs one HMAC, one SHA-256 and
// one call to the single-use store.
package pow

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"math/bits"
	"strings"
	"time"

	"usher/internal/fault"
	"usher/internal/limit"
	"usher/internal/token"
	"usher/internal/wire"
)

// Header is the request header that carries a solution.
const Header = wire.ChallengeHeader

// TTL is how long a challenge may be solved and used.
const TTL = 2 * time.Minute

// MaxBits is the most work a room may ask for.
const MaxBits = 32

// MaxNonce is the longest nonce accepted, in bytes: 1 to MaxNonce
// printable ASCII bytes, no ':'.
const MaxNonce = 64

var (
	// ErrRequired: the request carries no solution.
	ErrRequired = fault.New(fault.ChallengeNeeded, "proof of work required: solve the challenge")
	// ErrInvalid: the solution is malformed, wrong, expired, for another
	// room, or used before.
	ErrInvalid = fault.New(fault.ChallengeInvalid, "proof of work invalid: ask for a new challenge")
)

// RequiredError is ErrRequired with the challenge to solve.
type RequiredError struct{ Challenge Challenge }

func (e *RequiredError) Error() string { return ErrRequired.Error() }

// Unwrap makes errors.Is(err, ErrRequired) hold.
func (e *RequiredError) Unwrap() error { return ErrRequired }

// FaultChallenge puts the challenge in the error answer (fault.Challenged).
func (e *RequiredError) FaultChallenge() any { return e.Challenge }

// Challenge is what a client is asked to solve.
type Challenge struct {
	Token string `json:"token"`
	Bits  int    `json:"bits"`
}

// Guard issues and checks challenges. Used ids are remembered in a
// limit.Store (one event per TTL per id), so a solution is accepted once on
// every instance that shares the store.
type Guard struct {
	keys *token.Keyring
	used limit.Store
	now  func() time.Time
}

// New returns a guard.
func New(keys *token.Keyring, used limit.Store, now func() time.Time) *Guard {
	return &Guard{keys: keys, used: used, now: now}
}

// Issue returns a new challenge of bits for room.
func (g *Guard) Issue(room string, bits int) Challenge {
	var id [12]byte
	rand.Read(id[:])
	t := g.keys.SignChallenge(token.Challenge{
		Room: room, Bits: bits, ID: base64.RawURLEncoding.EncodeToString(id[:]),
		ExpiresAt: g.now().Add(TTL).Truncate(time.Second),
	})
	return Challenge{Token: t, Bits: bits}
}

// Check verifies solution (the Usher-Challenge header: "<token>:<nonce>")
// for room at the room's current bits, and spends it. A token issued when
// the room asked for fewer bits than now is refused, so raising the bits
// takes effect at once. Errors: ErrRequired, ErrInvalid, or the store's
// limit.ErrUnavailable.
func (g *Guard) Check(ctx context.Context, room string, bits int, solution string) error {
	if solution == "" {
		return ErrRequired
	}
	tok, nonce, ok := cut(solution)
	if !ok {
		return fmt.Errorf("%w: want <token>:<nonce>", ErrInvalid)
	}
	c, err := g.keys.ParseChallenge(tok, room)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if c.Bits < bits {
		return fmt.Errorf("%w: the room now asks for %d bits", ErrInvalid, bits)
	}
	if !Solves(tok, nonce, c.Bits) {
		return fmt.Errorf("%w: the nonce does not solve the challenge", ErrInvalid)
	}
	fresh, _, err := g.used.Allow(ctx, "pow:"+c.ID, limit.Rate{Events: 1, Per: TTL}, g.now())
	if err != nil {
		return err
	}
	if !fresh {
		return fmt.Errorf("%w: the challenge was used before", ErrInvalid)
	}
	return nil
}

// cut splits "<token>:<nonce>" at its last ':' and checks the nonce.
func cut(s string) (tok, nonce string, ok bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 1 {
		return "", "", false
	}
	tok, nonce = s[:i], s[i+1:]
	if len(nonce) == 0 || len(nonce) > MaxNonce {
		return "", "", false
	}
	for j := 0; j < len(nonce); j++ {
		if nonce[j] <= ' ' || nonce[j] > '~' {
			return "", "", false
		}
	}
	return tok, nonce, true
}

// Solves reports whether SHA-256(tok ":" nonce) starts with n zero bits.
func Solves(tok, nonce string, n int) bool {
	h := sha256.New()
	h.Write([]byte(tok))
	h.Write([]byte{':'})
	h.Write([]byte(nonce))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return leadingZeros(sum[:]) >= n
}

func leadingZeros(b []byte) int {
	n := 0
	for _, x := range b {
		if x != 0 {
			return n + bits.LeadingZeros8(x)
		}
		n += 8
	}
	return n
}

// Solve finds a nonce for c by brute force: a client in Go (the load
// generator, tests) uses it.
func Solve(c Challenge) string {
	for i := uint64(0); ; i++ {
		nonce := fmt.Sprintf("%x", i)
		if Solves(c.Token, nonce, c.Bits) {
			return nonce
		}
	}
}
