package gateway

import (
	"cmp"
	"errors"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"usher/internal/apierror"
	"usher/internal/canon"
	"usher/internal/fault"
	"usher/internal/gate"
	"usher/internal/pow"
	"usher/internal/queue"
	"usher/internal/wire"
)

// verdictKind is what the gate makes of one request.
type verdictKind int

const (
	// through: an open path, or a gated one with a valid pass (admitted is
	// set): the origin may serve it.
	through verdictKind = iota
	// own: a path under Prefix, usher's own.
	own
	// redirect: a GET or HEAD whose path is not canonical in structure
	// (location is the canonical form, 308), or a request that would pass
	// with credential parameters in its query (location is its target
	// without them, 307: the method and body are kept).
	redirect
	// needsPlace: a gated path without a valid pass; wait decides further.
	needsPlace
	// admitted: the visitor's turn has come; pass is a new pass.
	admitted
	// waiting: the visitor is in line; entry is its place.
	waiting
	// refused: err says why (a bad path or host, a closed room, a
	// challenge, the store down).
	refused
)

// verdict is the gate's decision on one request, made once by judge and
// wait and rendered by each edge (the proxy, usher auth).
type verdict struct {
	kind     verdictKind
	room     string
	path     string // the canonical path, once known
	location string // redirect
	code     int    // redirect: 308 when 0
	gated    bool
	// pass: the gate's admission (through a gated path).
	pass gate.Admitted
	// admitted: the new pass and its cookie; waiting: the place and the
	// ticket, if one was issued.
	visitor, newPass string
	cookie           *http.Cookie
	entry            wire.Entry
	ticket           string
	err              error
}

// ErrBadHost answers a request whose Host is not one of Config.PublicHosts.
var ErrBadHost = fault.New(fault.HostNotServed, "this host is not served here")

// judge decides on r from its target as sent (RequestURI): the host, the
// canonical path, the rules and the pass. Its only side effect is the
// pass's sliding renewal. A request that would pass while its query
// carries a credential (wire.CredentialParams) is sent to its target
// without it instead, so that no edge forwards a credential to the
// origin: credentials are read only by a request that takes a place.
func (p *core) judge(r *http.Request) verdict {
	v := p.judgeTarget(r)
	if v.kind != through {
		return v
	}
	q, stripped := wire.StripCredentials(r.URL.RawQuery)
	if !stripped {
		return v
	}
	target := r.RequestURI
	if target == "" {
		target = r.URL.RequestURI()
	}
	path, _, _ := strings.Cut(target, "?")
	if q != "" {
		path += "?" + q
	}
	return verdict{kind: redirect, code: http.StatusTemporaryRedirect, location: canon.Return(path)}
}

func (p *core) judgeTarget(r *http.Request) verdict {
	if r.Method == http.MethodConnect || r.Method == http.MethodTrace {
		return verdict{kind: refused, err: apierror.ErrMethodNotAllowed}
	}
	if !p.hostServed(r.Host) {
		return verdict{kind: refused, err: ErrBadHost}
	}
	target := r.RequestURI
	if target == "" { // a request made in-process rather than read off the wire
		target = r.URL.EscapedPath()
	}
	path, changed, err := canon.Target(target)
	if err == nil && changed && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		loc := (&url.URL{Path: path}).EscapedPath()
		if r.URL.RawQuery != "" {
			loc += "?" + r.URL.RawQuery
		}
		return verdict{kind: redirect, location: canon.Return(loc)}
	}
	if err != nil || changed {
		return verdict{kind: refused, err: ErrBadPath}
	}
	if path == WorkerPath || path == strings.TrimSuffix(Prefix, "/") || strings.HasPrefix(path, Prefix) {
		return verdict{kind: own, path: path}
	}
	room, gated, err := p.c.Rules.Resolve(path)
	if err != nil {
		return verdict{kind: refused, path: path, err: ErrBadPath.Detail("the case or form of this path is ambiguous; use the site's own links")}
	}
	v := verdict{kind: through, room: room, path: path, gated: gated}
	if !gated {
		return v
	}
	if bypass(p.c.Rules.Bypass, r, p.c.Trusted) != nil { // a probe or a partner: as an open path
		v.gated = false
		return v
	}
	if v.pass, err = p.gate.Admit(r, room); err == nil {
		return v
	}
	if status, _ := apierror.Status(err); status >= 500 { // the store is down: fail closed
		v.kind, v.err = refused, err
		return v
	}
	v.kind = needsPlace
	return v
}

// hostServed reports whether host (a Host header) is one of
// Config.PublicHosts; every host is when the list is empty.
func (p *core) hostServed(host string) bool {
	if len(p.c.PublicHosts) == 0 {
		return true
	}
	host = strings.ToLower(host)
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	for _, h := range p.c.PublicHosts {
		if h == host || h == name {
			return true
		}
	}
	return false
}

// wait completes a needsPlace verdict: it enters the queue or reads the
// visitor's place (setting the visitor's and ticket cookies on w), and
// answers admitted, waiting or refused.
func (p *core) wait(w http.ResponseWriter, r *http.Request, v verdict) verdict {
	visitor, ticket, e, err := p.place(r.Context(), w, r, v.room)
	if err != nil {
		v.kind, v.err = refused, err
		return v
	}
	place := p.c.Queue.Place(v.room, e)
	queue.Issued(&place, ticket)
	v.visitor = visitor
	if e.Status == queue.Active {
		pass, exp, cookie, err := gate.IssuePass(p.c.Keys, v.room, visitor, e.ExpiresAt, p.secure)
		if err != nil {
			v.kind, v.err = refused, err
			return v
		}
		place.Pass, place.PassExpiresAt = pass, exp
		v.kind, v.newPass, v.cookie = admitted, pass, cookie
	} else {
		v.kind, v.ticket = waiting, ticket
	}
	v.entry = wire.EntryFor(place)
	return v
}

// render writes every verdict that is not through or own: the redirect,
// the refusal, the waiting answer, and a browser's admission (a 303 back to
// the URL it asked for, with the pass cookie). An admitted JSON client gets
// its entry with the pass, 429 with Retry-After 0 (the proxy forwards its
// request instead).
func (p *core) render(w http.ResponseWriter, r *http.Request, v verdict) {
	asJSON := wantsJSON(r)
	switch v.kind {
	case redirect:
		w.Header().Set("Location", v.location)
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(cmp.Or(v.code, http.StatusPermanentRedirect))
	case refused:
		p.renderRefusal(w, r, v, asJSON)
	case admitted:
		http.SetCookie(w, v.cookie)
		w.Header().Set(wire.PassHeader, v.newPass)
		w.Header().Set("Cache-Control", "no-store")
		if asJSON {
			// Not the origin's answer, so not 2xx: the client asks again
			// at once with the pass, as after any poll that admits it.
			w.Header().Set("Retry-After", "0")
			writeEntry(w, http.StatusTooManyRequests, v.entry)
			return
		}
		http.Redirect(w, r, backURL(r), http.StatusSeeOther)
	case waiting:
		retry := max(1, int(math.Ceil(float64(v.entry.PollAfterMS)/1000)))
		w.Header().Set("Retry-After", strconv.Itoa(retry))
		if asJSON {
			if v.entry.State == wire.StateWaiting {
				t := p.textFor(r, v.room)
				if v.entry.Position > 0 { // not in the pre-queue before the draw
					v.entry.AheadText = aheadText(t, v.entry.Ahead)
				}
				if v.entry.OpensAt == nil {
					v.entry.ETAText = entryETA(t, v.entry)
				}
			}
			writeEntry(w, http.StatusTooManyRequests, v.entry)
			return
		}
		p.renderPage(w, r, http.StatusTooManyRequests, p.waitingPage(w, r, v.room, v.ticket, v.entry, retry))
	default:
		p.errs.Write(w, r, apierror.ErrNotFound)
	}
}

// renderRefusal writes a refused verdict: as the JSON error, or the waiting
// page's state for what a browser may retry, or a plain page.
func (p *core) renderRefusal(w http.ResponseWriter, r *http.Request, v verdict, asJSON bool) {
	err := v.err
	status, _ := apierror.Status(err)
	switch {
	case errors.Is(err, queue.ErrRoomClosed):
		p.refusedRoom(w, r, v.room, err)
		return
	case errors.Is(err, ErrNoPlace):
		w.Header().Set("Allow", "GET, POST")
		p.errs.Write(w, r, err)
		return
	case v.room == "" || asJSON: // a bad path or host, or a JSON client
		p.errs.Write(w, r, err) // it sets Retry-After on 429 and 503; the challenge on 428
		return
	}
	if status >= 500 {
		p.log.Error("gate failed", "room", v.room, "status", status, "err", err)
	}
	if c, ok := errors.AsType[*pow.RequiredError](err); ok {
		// No visitor, no place, no cookie yet: the page's script solves
		// the challenge and asks again with the solution.
		p.renderPage(w, r, http.StatusPreconditionRequired, Page{State: StateChallenge, Room: v.room, Challenge: c.Challenge})
		return
	}
	switch {
	case errors.Is(err, pow.ErrInvalid):
		// A wrong, expired or spent solution: the error state, whose retry
		// (and refresh) asks again without one, for a new challenge.
		p.renderPage(w, r, status, Page{State: StateError, Room: v.room, Refresh: 2, PollAfterMS: 2000})
	case errors.Is(err, queue.ErrQueueFull):
		retry := apierror.RetryAfterFor(err)
		w.Header().Set("Retry-After", retry)
		secs, _ := strconv.Atoi(retry)
		p.renderPage(w, r, status, Page{State: StateFull, Room: v.room, Refresh: secs, PollAfterMS: int64(secs) * 1000})
	case status != http.StatusTooManyRequests && status < 500:
		// A refusal (no invite, a bad credential): retrying does not help,
		// so a plain page, not the waiting page that reloads.
		p.plainPage(w, status, fault.Message(err))
	default:
		w.Header().Set("Retry-After", apierror.RetryAfterFor(err))
		p.renderPage(w, r, status, Page{State: StateError, Room: v.room, Refresh: 2, PollAfterMS: 2000})
	}
}
