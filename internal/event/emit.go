package event

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"time"
)

// Emitter takes events for publication. Emit never blocks and never
// fails: an emitter that cannot keep up drops the event and counts it
// (natsevent.Publisher). A nil Emitter is not allowed; producers that have
// none hold a nil interface and emit nothing.
type Emitter interface {
	Emit(Event)
}

// Offerer is an Emitter that can refuse an event instead of dropping it:
// Offer reports whether it took e (false: its buffer is full; nothing was
// counted as dropped). A producer whose events add up (counted) keeps
// what was refused and offers it again later, so nothing is lost.
type Offerer interface {
	Emitter
	Offer(Event) bool
}

// New returns an event of type t with a fresh ID, at in UTC, and d as its
// Data (omitted when every field of d is zero).
func New(t Type, room, visitor string, at time.Time, d Data) Event {
	e := Event{ID: NewID(), Type: t, Room: room, At: at.UTC(), Visitor: visitor}
	if !d.zero() {
		e.Data, _ = json.Marshal(d) // Data has no type json cannot encode
	}
	return e
}

func (d Data) zero() bool {
	return d.ETAMS == 0 && d.From == "" && d.Count == 0 && d.Removed == 0 && d.Schedule == 0 && d.Units == 0 &&
		d.Reservation == "" && d.Amount == 0 && d.Who == "" && d.Old == nil && d.New == nil &&
		d.Arrivals == 0 && d.Admissions == 0 && d.Abandons == 0 && d.Expired == 0 &&
		d.LeftActive == 0 && d.Waits == 0 && d.WaitSumMS == 0 && len(d.WaitHist) == 0 && d.ETAs == 0 &&
		d.ETAErrSumMS == 0 && d.ETAAbsErrSumMS == 0
}

// NewID returns a random event ID: 128 bits, base64url (22 characters).
func NewID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
