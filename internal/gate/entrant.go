package gate

import (
	"context"
	"net/http"

	"usher/internal/flood"
	"usher/internal/identity"
	"usher/internal/queue"
	"usher/internal/token"
)

// Door decides who an entry enters as and whether it may take a place: the
// one path by which the API's entries and the edges' page views come in.
//
// Contract: every entry into a room passes that room's defences (its
// invite or identity rule, then the flood guard: per-client limit and
// proof of work) whatever cookies it carries; only a request showing a
// valid ticket for the same visitor in the same room (its own place) skips
// the guard, so a visitor holds at most one place per defence it passed.
// A room this instance has no view of is read from the store first: its
// settings, not the zero ones, decide, and an unknown room is refused
// (queue.ErrRoomNotFound) before anything is counted or minted. A new
// anonymous visitor's cookie is the caller's to set, and only once the
// entry succeeded (Entrant.Cookie).
type Door struct {
	Queue    *queue.Queue
	Keys     *token.Keyring
	Identity *identity.Verifier
	// Flood is the per-client limit and proof of work; nil asks neither.
	Flood *flood.Guard
	// SecureCookie sets the Secure attribute on a new visitor cookie.
	SecureCookie bool
}

// Entrant is who an entry enters as.
type Entrant struct {
	Visitor string
	// Cookie is the signed usher_vid cookie of a new anonymous visitor,
	// nil for a known one: set it once the entry succeeded, never before.
	Cookie *http.Cookie
}

// Credentials are what an entry brings besides cookies.
type Credentials struct {
	Invite, Identity string
	// Holds names the visitor of a valid ticket for the room that the
	// request carries ("" for none): an entry by that same visitor is its
	// own place and skips the flood guard.
	Holds string
}

// Settings returns the room's settings: this instance's view, else the
// store's (queue.ErrRoomNotFound for a room that does not exist).
func (d Door) Settings(ctx context.Context, room string) (queue.Settings, error) {
	if v, ok := d.Queue.View(room); ok {
		return v.Settings, nil
	}
	v, err := d.Queue.Room(ctx, room)
	if err != nil {
		return queue.Settings{}, err
	}
	return v.Settings, nil
}

// Admit returns who the entry r into room enters as, after the room's
// defences (Door's contract). Errors: the room's (queue.ErrRoomNotFound,
// the store's), the credentials' (EntryVisitor), the flood guard's.
func (d Door) Admit(ctx context.Context, r *http.Request, room string, c Credentials) (Entrant, error) {
	s, err := d.Settings(ctx, room)
	if err != nil {
		return Entrant{}, err
	}
	visitor, err := EntryVisitor(d.Keys, d.Identity, room, s, c.Invite, c.Identity)
	if err != nil {
		return Entrant{}, err
	}
	known := visitor != ""
	if !known {
		visitor, known = VisitorFrom(r, d.Keys)
	}
	if d.Flood != nil && (visitor == "" || visitor != c.Holds) {
		if err := d.Flood.NewPlace(ctx, r, room, s); err != nil {
			return Entrant{}, err
		}
	}
	if known {
		return Entrant{Visitor: visitor}, nil
	}
	id, cookie := NewVisitor(d.Keys, d.SecureCookie)
	return Entrant{Visitor: id, Cookie: cookie}, nil
}
