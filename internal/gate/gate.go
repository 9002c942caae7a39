// Package gate is the middleware that lets only admitted visitors through.
//
// A request passes when it carries a valid pass for the gate's room (an
// `Authorization: Bearer` header or the usher_pass cookie) and the store says
// the visitor still holds an active slot; passing renews the slot's sliding
// expiry. Once a pass has used half its life the gate sends a fresh one in
// the Usher-Pass response header (and the cookie, if it came in one).
//
// The gate fails closed: when the store cannot be reached it answers 503 with
// Retry-After and lets nothing through, unless Options.FailOpen is set, in
// which case a request with a validly signed, unexpired pass passes without
// the liveness check (seed 003 §6).
package gate

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"usher/internal/apierror"
	"usher/internal/queue"
	"usher/internal/token"
)

// PassCookie is the cookie that carries a pass for browsers.
const PassCookie = "usher_pass"

// PassHeader is the response header that carries a renewed pass.
const PassHeader = "Usher-Pass"

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
}

type ctxKey struct{}

// Admitted is what the gate knows about the visitor of a request it passed.
type Admitted struct {
	Room, Visitor string
	// ExpiresAt is the slot's renewed expiry (the pass's own expiry when the
	// gate failed open).
	ExpiresAt time.Time
	// Pass is the pass to use from now on: the renewed one, or the one sent.
	Pass    string
	renewed bool
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

// Middleware lets a request through to next only when Check passes it for
// the room Options.Room names.
func (g *Gate) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := g.Check(w, r, g.o.Room(r))
		if !ok {
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, a)))
	})
}

// Check is the gate for a handler that learns the room only from the
// request body: it reports whether the request may pass for room. When it
// may not, the error response is already written; when it may, a renewed
// pass is already set on w.
func (g *Gate) Check(w http.ResponseWriter, r *http.Request, room string) (Admitted, bool) {
	a, err := admit(r, room, g.q, g.keys, g.o)
	if err != nil {
		g.o.Errors.Write(w, r, err)
		return Admitted{}, false
	}
	if a.renewed {
		w.Header().Set(PassHeader, a.Pass)
		if _, fromCookie := PassFrom(r); fromCookie {
			http.SetCookie(w, PassCookieFor(a.Pass, a.ExpiresAt, g.o.SecureCookie))
		}
	}
	return a, true
}

func admit(r *http.Request, room string, q *queue.Queue, keys *token.Keyring, o Options) (Admitted, error) {
	raw, _ := PassFrom(r)
	if raw == "" {
		return Admitted{}, queue.ErrNotAdmitted
	}
	pass, err := keys.ParsePass(raw, room)
	if err != nil {
		return Admitted{}, err
	}
	a := Admitted{Room: room, Visitor: pass.Visitor, ExpiresAt: pass.ExpiresAt, Pass: raw}
	exp, err := q.Renew(r.Context(), room, pass.Visitor)
	switch {
	case err == nil:
	case o.FailOpen && (errors.Is(err, queue.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)):
		o.Logger.Warn("gate failing open", "room", room, "err", err)
		return a, nil
	default:
		return Admitted{}, err
	}
	a.ExpiresAt = exp
	now := q.Now()
	if pass.ExpiresAt.Sub(now) < exp.Sub(now)/2 { // half the pass's life is used
		if fresh, err := keys.SignPass(token.Pass{Room: room, Visitor: pass.Visitor, ExpiresAt: exp}); err == nil {
			a.Pass, a.renewed = fresh, true
		}
	}
	return a, nil
}

// PassFrom returns the pass a request carries, from the Authorization header
// or else the cookie, and whether it came from the cookie.
func PassFrom(r *http.Request) (string, bool) {
	if tok, ok := Bearer(r); ok {
		return tok, false
	}
	if c, err := r.Cookie(PassCookie); err == nil {
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
		Name: PassCookie, Value: pass, Path: "/", Expires: exp,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode,
	}
}
