// Package gate decides whether a request may pass: only admitted visitors
// do. A request passes when it carries a valid pass for the room (an
// `Authorization: Bearer` header or the usher_pass cookie) and the store says
// the visitor still holds an active slot; passing renews the slot's sliding
// expiry, and a pass past half its life comes back renewed (Renewal). Door
// decides the way in: who an entry enters as, and whether it may.
//
// Admit decides and writes nothing; the HTTP edge writes the decision:
// Middleware and Check here, the reverse proxy in package gateway.
//
// Limits: the gate fails closed. When the store cannot be reached nothing
// passes (Middleware and Check answer 503 with Retry-After), unless
// Options.FailOpen is set: then a validly signed, unexpired pass passes
// without the liveness check (seed 003 §6).
package gate

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"usher/internal/apierror"
	"usher/internal/identity"
	"usher/internal/queue"
	"usher/internal/token"
	"usher/internal/wire"
)

// Options configure a gate.
type Options struct {
	// Room names the room a request is gated for (Middleware only).
	Room func(*http.Request) string
	// FailOpen lets signed passes through when the store is unreachable.
	FailOpen bool
	// SecureCookie sets the Secure attribute on renewed pass cookies.
	SecureCookie bool
	Errors       apierror.Writer
	Logger       *slog.Logger
	// Unmeasured turns off what Middleware reports by default: the wrapped
	// handler's latency and its 5xx answers, for the room's adaptive
	// admission (queue.Queue.Observe). usher's own API sets it (its
	// handler is not the site).
	Unmeasured bool
}

type ctxKey struct{}

// Admitted is what the gate knows about the visitor of a request it passed.
type Admitted struct {
	Room, Visitor string
	// ExpiresAt is the slot's renewed expiry (the pass's own expiry when the
	// gate failed open).
	ExpiresAt time.Time
	// Pass is the pass to use from now on: the renewed one, or the one sent.
	Pass string
	// Renewed reports that Pass is a new pass the client must be given
	// (Renewal says how).
	Renewed bool
	// viaCookie: the request carried its pass in the pass cookie.
	viaCookie bool
}

// FromContext returns the admitted visitor of a request that passed the gate.
func FromContext(ctx context.Context) (Admitted, bool) {
	a, ok := ctx.Value(ctxKey{}).(Admitted)
	return a, ok
}

// Gate checks passes for one usher server.
type Gate struct {
	q    *queue.Queue
	keys *token.Keyring
	o    Options
}

// New returns a gate.
func New(q *queue.Queue, keys *token.Keyring, o Options) *Gate {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Gate{q: q, keys: keys, o: o}
}

// Middleware lets a request through to next only when Admit passes it for
// the room Options.Room names, with the renewed pass set on the response;
// otherwise it writes the error. Unless Options.Unmeasured, it reports how
// long next took and whether it answered 5xx to the room's adaptive
// admission (rooms that are not adaptive ignore it).
func (g *Gate) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		room := g.o.Room(r)
		a, ok := g.Check(w, r, room)
		if !ok {
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, a))
		if g.o.Unmeasured {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		sw := &StatusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		g.q.Observe(room, time.Since(start), sw.Status() >= 500)
	})
}

// StatusWriter remembers the status a handler answered with, for
// middleware that measures handlers.
type StatusWriter struct {
	http.ResponseWriter
	status int
}

// Status is the status written: the first WriteHeader's, else 200.
func (w *StatusWriter) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

func (w *StatusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Check is the gate for a handler that learns the room only from the
// request body: it runs Admit and writes the decision. When the request may
// not pass, the error answer is written and ok is false; when it may, the
// renewed pass (if any) is set on w.
func (g *Gate) Check(w http.ResponseWriter, r *http.Request, room string) (a Admitted, ok bool) {
	a, err := g.Admit(r, room)
	if err != nil {
		g.o.Errors.Write(w, r, err)
		return Admitted{}, false
	}
	for k, vs := range g.Renewal(a) {
		w.Header()[k] = append(w.Header()[k], vs...)
	}
	return a, true
}

// Admit decides whether the request may pass for room. It passes when the
// request carries a valid pass for room and the visitor still holds an
// active slot, whose expiry it slides; once the pass has used half its life,
// Admitted carries a fresh one (Renewed). It writes nothing: the caller
// writes the decision (Renewal gives the headers).
//
// Errors: queue.ErrNotAdmitted without a pass or without a slot, the token
// package's errors for a bad pass, the store's errors (queue.ErrUnavailable)
// unless Options.FailOpen lets a signed pass through without the slot check.
func (g *Gate) Admit(r *http.Request, room string) (Admitted, error) {
	raw, viaCookie := PassFrom(r)
	if raw == "" {
		return Admitted{}, queue.ErrNotAdmitted
	}
	pass, err := g.keys.ParsePass(raw, room)
	if err != nil {
		return Admitted{}, err
	}
	a := Admitted{Room: room, Visitor: pass.Visitor, ExpiresAt: pass.ExpiresAt, Pass: raw, viaCookie: viaCookie}
	exp, err := g.q.Renew(r.Context(), room, pass.Visitor)
	switch {
	case err == nil:
	case g.o.FailOpen && (errors.Is(err, queue.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)):
		g.o.Logger.Warn("gate failing open", "room", room, "err", err)
		return a, nil
	default:
		return Admitted{}, err
	}
	a.ExpiresAt = exp
	now := g.q.Now()
	if pass.ExpiresAt.Sub(now) < exp.Sub(now)/2 { // half the pass's life is used
		if fresh, err := g.keys.SignPass(token.Pass{Room: room, Visitor: pass.Visitor, ExpiresAt: exp}); err == nil {
			a.Pass, a.Renewed = fresh, true
		}
	}
	return a, nil
}

// Renewal returns the response headers that hand a's renewed pass to the
// client: Usher-Pass, and the pass cookie when the request carried the pass
// in the cookie. It is nil when the pass was not renewed.
func (g *Gate) Renewal(a Admitted) http.Header {
	if !a.Renewed {
		return nil
	}
	h := http.Header{wire.PassHeader: {a.Pass}}
	if a.viaCookie {
		h["Set-Cookie"] = []string{PassCookieFor(a.Pass, a.ExpiresAt, g.o.SecureCookie).String()}
	}
	return h
}

// PassFrom returns the pass a request carries, from the Authorization header
// or else the cookie, and whether it came from the cookie.
func PassFrom(r *http.Request) (string, bool) {
	if tok, ok := Bearer(r); ok {
		return tok, false
	}
	if c, err := r.Cookie(wire.PassCookie); err == nil {
		return c.Value, true
	}
	return "", false
}

// Bearer returns the token of an `Authorization: Bearer …` header.
func Bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) > len(prefix) && strings.EqualFold(h[:len(prefix)], prefix) {
		return strings.TrimSpace(h[len(prefix):]), true
	}
	return "", false
}

// PassCookieFor returns the cookie that carries pass until exp.
func PassCookieFor(pass string, exp time.Time, secure bool) *http.Cookie {
	return &http.Cookie{
		Name: wire.PassCookie, Value: pass, Path: "/", Expires: exp,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode,
	}
}

// VisitorFrom returns the visitor id of the request's valid usher_vid
// cookie: a request without one would be a new visitor.
func VisitorFrom(r *http.Request, keys *token.Keyring) (string, bool) {
	if c, err := r.Cookie(wire.VisitorCookie); err == nil {
		if id, err := keys.ParseVisitor(c.Value); err == nil {
			return id, true
		}
	}
	return "", false
}

// EntryVisitor returns the visitor an entry names with its credentials in
// a room with settings s: the invite's holder, else the asserted account;
// "" for an entry that names none and may be a new anonymous visitor.
// A presale room (RequireInvite) refuses an entry without an invite, an
// identity assertion included; a RequireIdentity room refuses one with
// neither. The API and the proxy both ask it, so that the two agree.
// Admin-named visitors are the caller's business.
func EntryVisitor(keys *token.Keyring, ids *identity.Verifier, room string, s queue.Settings, invite, assertion string) (string, error) {
	switch {
	case invite != "":
		inv, err := keys.ParseInvite(invite, room)
		if err != nil {
			return "", err
		}
		return inv.Visitor(), nil
	case s.RequireInvite:
		return "", token.ErrInviteRequired
	case assertion != "":
		return ids.Visitor(assertion)
	case s.RequireIdentity:
		return "", identity.ErrRequired
	}
	return "", nil
}

// EntryLane returns the priority lane code an entry brings, verified
// for room: nil for none ("").
func EntryLane(keys *token.Keyring, room, code string) (*queue.LaneCode, error) {
	if code == "" {
		return nil, nil
	}
	c, err := keys.ParseLaneCode(code, room)
	if err != nil {
		return nil, err
	}
	return &queue.LaneCode{ID: c.ID, Uses: c.Uses, ExpiresAt: c.ExpiresAt}, nil
}

// Enter enters the visitor into the room's priority lane with lane, or
// into its line without one (nil).
func Enter(ctx context.Context, q *queue.Queue, room, visitor string, lane *queue.LaneCode) (queue.Entry, bool, error) {
	if lane != nil {
		return q.EnterLane(ctx, room, visitor, *lane)
	}
	return q.Enter(ctx, room, visitor)
}

// NewVisitor returns a new anonymous visitor id and the signed usher_vid
// cookie that keeps it in the browser. Callers mint only after
// VisitorFrom found no valid cookie (and, for strangers, after asking the
// flood guard).
func NewVisitor(keys *token.Keyring, secure bool) (id string, set *http.Cookie) {
	id = token.NewVisitorID()
	return id, &http.Cookie{
		Name: wire.VisitorCookie, Value: keys.SignVisitor(id), Path: "/",
		MaxAge: int(wire.VisitorCookieAge.Seconds()), HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode,
	}
}
