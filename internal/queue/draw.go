package queue

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"

	"usher/internal/fault"
)

// The opening draw makes the start of a sale fair: arriving a millisecond
// after the opening with a bot gains nothing over arriving an hour before
// it. A room with Settings.OpensAt takes entrants into a pre-queue until
// then and admits nobody. At the first Enter, Status or Admit at or after
// OpensAt, the store draws: every pre-queue entrant is ordered by DrawKey
// (HMAC-SHA256 with the room's secret seed, ascending) and queued ahead of
// everyone who enters later, who queue in arrival order as usual.
// Visitors already waiting when OpensAt was set keep their places ahead of
// the pre-queue.
//
// The seed is chosen (32 random bytes) by the store when OpensAt is first
// set and never changes; its Commitment is published before the opening
// and the seed after it (GET /api/v1/rooms/{room}/draw), so anyone can
// check that the order was fixed before anyone entered and recompute it
// (usher verify-draw). A room draws once: after the draw, OpensAt cannot
// be changed.

// ErrNoDraw: the room has no opening draw (it never had an OpensAt).
var ErrNoDraw = fault.New(fault.DrawNotFound, "the room has no opening draw")

// ErrDrawn: settings that change OpensAt after the room's draw (a room
// draws once). Stores refuse them atomically with the draw.
var ErrDrawn = ErrInvalid.Detail("opens_at: the room has drawn at its opening; a room draws once")

// Draw is a room's opening draw.
type Draw struct {
	// Seed is the draw's secret: SeedSize random bytes chosen by the store
	// when OpensAt was first set; nil when the room never had an OpensAt.
	// It is shown to nobody before the draw.
	Seed []byte
	// Done reports that the draw took place.
	Done bool
	// Entrants counts the pre-queue: its entrants so far before the draw,
	// the entrants the draw ordered after it.
	Entrants int64
}

// SeedSize is the length of a draw's seed in bytes.
const SeedSize = 32

// NewSeed returns a new random seed (crypto/rand; it never fails).
func NewSeed() []byte {
	seed := make([]byte, SeedSize)
	rand.Read(seed)
	return seed
}

// Commitment is hex(SHA-256(seed)): what is published before the opening.
func Commitment(seed []byte) string {
	sum := sha256.Sum256(seed)
	return hex.EncodeToString(sum[:])
}

// DrawKey is HMAC-SHA256(key = seed, message = visitor). The draw orders
// the pre-queue by ascending key, compared as bytes, which is the order of
// the keys' lower-case hex spellings.
func DrawKey(seed []byte, visitor string) [sha256.Size]byte {
	m := hmac.New(sha256.New, seed)
	m.Write([]byte(visitor))
	var k [sha256.Size]byte
	m.Sum(k[:0])
	return k
}

// DrawOrder returns visitors in the order the draw with seed admits them.
func DrawOrder(seed []byte, visitors []string) []string {
	type keyed struct {
		key     [sha256.Size]byte
		visitor string
	}
	ks := make([]keyed, len(visitors))
	for i, v := range visitors {
		ks[i] = keyed{DrawKey(seed, v), v}
	}
	slices.SortFunc(ks, func(a, b keyed) int { return bytes.Compare(a.key[:], b.key[:]) })
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.visitor
	}
	return out
}

// PreQueue reports whether, at now, a room with settings s and draw d
// takes new entrants into its pre-queue: it has a seed, has not drawn, and
// now is before OpensAt.
func (d Draw) PreQueue(s Settings, now time.Time) bool {
	return d.Seed != nil && !d.Done && !s.OpensAt.IsZero() && now.Before(s.OpensAt)
}

// Due reports whether a room with settings s and draw d draws at now: it
// has a seed, has not drawn, and OpensAt is not after now (or was cleared).
// Stores draw at the first Enter, Status or Admit for which Due is true.
func (d Draw) Due(s Settings, now time.Time) bool {
	return d.Seed != nil && !d.Done && (s.OpensAt.IsZero() || !now.Before(s.OpensAt))
}
