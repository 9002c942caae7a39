package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"usher/internal/apierror"
	"usher/internal/edgeconf"
	"usher/internal/fault"
	"usher/internal/wire"
)

// The routes of Auth, under Prefix. A front proxy sends each the original
// request's headers (Cookie, Authorization, Accept, Accept-Language,
// X-Forwarded-For) and names its method, target and host:
//
//   - AuthPath, for Caddy's forward_auth and Traefik's ForwardAuth: in
//     X-Forwarded-Method, X-Forwarded-Uri and X-Forwarded-Host. A passed
//     request gets 204; anything else gets its whole answer (the waiting
//     page or JSON, the redirect, the refusal), which these proxies copy to
//     the client.
//   - CheckPath, for nginx's auth_request, which takes only 2xx, 401 and
//     403: in X-Original-Method, X-Original-URI and X-Forwarded-Host; 204
//     or 401. On 401 nginx hands the original request (error_page) to
//     WaitPath, which answers it whole.
//   - EnvoyPrefix, for Envoy's ext_authz in HTTP mode (path_prefix): the
//     original target follows the prefix and the method and Host are the
//     request's own; answered as AuthPath, but 200 when it passes (Envoy
//     takes no other 2xx).
//   - ReleasePath: the front proxy asks it, with the client's headers and
//     the original target, when the origin's answer carries Usher-Release;
//     it ends the visitor's slot (204). nginx and Caddy can make no call
//     after the origin answered: they log the release to ServeReleases
//     instead (internal/edgeconf renders both).
//
// A passed check on a gated path answers Usher-Visitor and Usher-Room, for
// the front proxy to hand to the origin (replacing any the client sent).
//
// Everything else under Prefix is usher's own (API, worker, console).
const (
	AuthPath    = Prefix + "auth"
	CheckPath   = Prefix + "auth/check"
	WaitPath    = Prefix + "auth/wait"
	ReleasePath = Prefix + "auth/release"
	EnvoyPrefix = Prefix + "auth/envoy"
)

// Auth is the gate without the proxy, for a site whose front proxy (nginx,
// Caddy, Traefik, Envoy) asks it about each request: the same decision as
// Proxy (judge, wait), answered in the forward-auth protocols. Config's
// Origin and Transport are unused.
//
// Limits: the front proxy must send it the raw request target (nginx's
// $request_uri, not $uri), since usher decides on what the origin will
// parse; it does not see the origin's answers, so the room's adaptive
// admission gets no latency signal from them; its listener must be
// reachable only by the front proxy, whose X-Forwarded-* it believes.
type Auth struct{ *core }

// NewAuth returns the auth edge. It starts nothing.
func NewAuth(c Config) (*Auth, error) {
	k, err := newCore(&c)
	if err != nil {
		return nil, err
	}
	return &Auth{k}, nil
}

// errNoOriginal answers a check that does not say which request it is
// about: the front proxy's configuration lacks a header.
var errNoOriginal = fault.New(fault.Invalid, "the front proxy did not name the original request (X-Original-URI / X-Forwarded-Uri)")

// ServeHTTP serves the checks and usher's own routes.
func (a *Auth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil && r.Body != http.NoBody {
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(a.c.BodyTimeout))
	}
	w = &noStore{ResponseWriter: w}
	path := r.URL.Path
	switch {
	case path == CheckPath:
		a.check(w, r, "X-Original-Method", "X-Original-URI", false, http.StatusNoContent)
	case path == AuthPath:
		a.check(w, r, "X-Forwarded-Method", "X-Forwarded-Uri", true, http.StatusNoContent)
	case path == WaitPath:
		a.check(w, r, "X-Original-Method", "X-Original-URI", true, http.StatusNoContent)
	case path == EnvoyPrefix || strings.HasPrefix(path, EnvoyPrefix+"/"):
		a.check(w, r, "", "", true, http.StatusOK) // ext_authz takes only 200
	case path == ReleasePath:
		a.release(w, r)
	default:
		v := a.judge(r)
		if v.kind == own {
			a.serveOwn(w, r, v.path)
			return
		}
		a.errs.Write(w, r, apierror.ErrNotFound) // usher auth serves no site
	}
}

// original is the request the front proxy asks about, from its method and
// target headers (both "" for Envoy: the prefixed target itself).
func original(r *http.Request, methodHeader, uriHeader string) (*http.Request, error) {
	method, target, host := r.Method, strings.TrimPrefix(r.RequestURI, EnvoyPrefix), r.Host
	if uriHeader != "" {
		method, target = r.Header.Get(methodHeader), r.Header.Get(uriHeader)
		host = r.Header.Get("X-Forwarded-Host")
	}
	if target == "" {
		return nil, errNoOriginal
	}
	if method == "" {
		method = http.MethodGet
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil, ErrBadPath
	}
	o := r.Clone(r.Context())
	o.Method, o.RequestURI, o.URL, o.Host = method, target, u, host
	for _, h := range []string{methodHeader, uriHeader, "X-Forwarded-Uri", "X-Original-URI"} {
		if h != "" {
			o.Header.Del(h)
		}
	}
	return o, nil
}

// check answers whether the original request may pass: passed (204, or 200
// for Envoy) with the renewed pass (Usher-Pass, and the pass cookie when it
// came in one), else its whole answer (whole) or 401.
func (a *Auth) check(w http.ResponseWriter, r *http.Request, methodHeader, uriHeader string, whole bool, passed int) {
	w.Header().Set("Cache-Control", "no-store")
	o, err := original(r, methodHeader, uriHeader)
	if errors.Is(err, ErrBadPath) && !whole {
		w.WriteHeader(http.StatusUnauthorized) // the wait route answers it
		return
	}
	if err != nil {
		a.errs.Write(w, r, err)
		return
	}
	v := a.judge(o)
	if v.kind == through {
		if v.gated {
			for k, vs := range a.gate.Renewal(v.pass) {
				w.Header()[k] = vs
			}
			w.Header().Set(wire.VisitorHeader, v.pass.Visitor)
			w.Header().Set(wire.RoomHeader, v.room)
		}
		w.WriteHeader(passed)
		return
	}
	if !whole {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	switch v.kind {
	case own: // the front proxy routes Prefix to usher, never to the origin
		a.errs.Write(w, o, apierror.ErrNotFound)
		return
	case needsPlace:
		v = a.wait(w, o, v)
	}
	a.render(w, o, v)
}

// release ends the slot of the pass the original request carries, in the
// room its path maps to, and clears the pass cookie.
func (a *Auth) release(w http.ResponseWriter, r *http.Request) {
	methodHeader, uriHeader := "X-Original-Method", "X-Original-URI"
	if r.Header.Get(uriHeader) == "" {
		methodHeader, uriHeader = "X-Forwarded-Method", "X-Forwarded-Uri"
	}
	o, err := original(r, methodHeader, uriHeader)
	if err == nil {
		err = a.leave(o)
	}
	if err != nil {
		a.errs.Write(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: wire.PassCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: a.secure, SameSite: http.SameSiteLaxMode})
	w.WriteHeader(http.StatusNoContent)
}

// leave ends the slot of the pass o carries, in the room o's path maps to;
// a request that holds no slot there (no pass, open path) is a no-op.
func (a *Auth) leave(o *http.Request) error {
	v := a.judge(o)
	if v.kind != through || !v.gated {
		return nil
	}
	return a.c.Queue.Leave(o.Context(), v.room, v.pass.Visitor)
}

// ServeReleases reads the release datagrams of front proxies
// (edgeconf.ParseRelease) from pc until it is closed or ctx ends, and ends
// each one's slot as ReleasePath does: only the pass the datagram carries
// (cookie or Authorization) names the visitor, so a datagram without a
// valid pass ends nothing. A malformed datagram or a store fault is logged
// and dropped: the slot then expires as any other does.
func (a *Auth) ServeReleases(ctx context.Context, pc net.PacketConn) error {
	stop := context.AfterFunc(ctx, func() { pc.Close() })
	defer stop()
	buf := make([]byte, 64<<10)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		rel, err := edgeconf.ParseRelease(buf[:n])
		if err == nil {
			err = a.leave(releasedRequest(ctx, rel))
		}
		if err != nil {
			a.log.Warn("release datagram dropped", "from", from.String(), "err", err)
		}
	}
}

// releasedRequest is the request a release datagram reports, carrying its
// pass as the client sent it.
func releasedRequest(ctx context.Context, rel edgeconf.Release) *http.Request {
	o := (&http.Request{Method: rel.Method, RequestURI: rel.URI, Host: rel.Host, Header: http.Header{}}).WithContext(ctx)
	o.URL, _ = url.ParseRequestURI(rel.URI)
	if o.URL == nil {
		o.URL = &url.URL{}
	}
	if rel.Pass != "" {
		o.AddCookie(&http.Cookie{Name: wire.PassCookie, Value: rel.Pass})
	}
	if rel.Authorization != "" {
		o.Header.Set("Authorization", rel.Authorization)
	}
	return o
}
