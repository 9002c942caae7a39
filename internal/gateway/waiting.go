package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"fmt"
	"html/template"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"usher/internal/apierror"
	"usher/internal/canon"
	"usher/internal/fault"
	"usher/internal/gate"
	"usher/internal/queue"
	"usher/internal/token"
	"usher/internal/wire"
)

//go:embed page/*.html page/waiting.css page/waiting.js page/pow.js page/text/*.json
var pages embed.FS

var plainTmpl = template.Must(template.ParseFS(pages, "page/plain.html"))

// waitingPage is the page of a waiting visitor. A new ticket records its
// position in the start cookie; otherwise the cookie gives it.
func (p *core) waitingPage(w http.ResponseWriter, r *http.Request, room, ticket string, resp wire.Entry, refresh int) Page {
	start := resp.Position
	if ticket != "" {
		http.SetCookie(w, &http.Cookie{
			Name: wire.RoomStartCookie(room), Value: strconv.FormatInt(start, 10), Path: "/",
			MaxAge: int(token.TicketTTL.Seconds()), HttpOnly: true, Secure: p.secure, SameSite: http.SameSiteLaxMode,
		})
	} else if c, err := r.Cookie(wire.RoomStartCookie(room)); err == nil {
		if n, err := strconv.ParseInt(c.Value, 10, 64); err == nil {
			start = max(start, n)
		}
	}
	state := StateWaiting
	switch {
	case resp.State == wire.StateClosed:
		state = StateClosed
	case resp.State == wire.StateSoldOut:
		state = StateSoldOut
	case resp.RoomState == wire.RoomPreQueue && resp.Position == 0:
		state = StatePreQueue
	case resp.RoomState == wire.RoomDraw && resp.Position == 0:
		state = StateDraw
	case resp.RoomState == wire.RoomPaused, resp.RoomState == wire.RoomPreQueue:
		state = StatePaused // in line before the pre-queue: admitted after the opening
	}
	pg := Page{
		State: state, Room: room, Position: resp.Position, Ahead: resp.Ahead,
		StartPosition: start, Progress: progress(start, resp.Position),
		ETA: entryETA(p.textFor(r, room), resp), ETASeconds: resp.ETASeconds,
		Refresh: refresh, PollAfterMS: resp.PollAfterMS,
	}
	if resp.OpensAt != nil {
		pg.OpensAt = *resp.OpensAt
	}
	return pg
}

// renderPage writes the waiting page template in one of its states.
func (p *core) renderPage(w http.ResponseWriter, r *http.Request, status int, pg Page) {
	set := p.pages.current().forRoom(pg.Room)
	pg.UpdatedAt = p.c.Queue.Now()
	pg.URL = backURL(r)
	set.fill(&pg, p.lang.pick(r))
	pg.Languages = p.langChoices(set, pg.T.Lang, pg.URL)
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Vary", "Accept")
	if p.lang.forced == "" {
		h.Add("Vary", "Accept-Language")
	}
	h.Set("Content-Language", pg.T.Lang)
	var buf bytes.Buffer
	if err := set.waiting.Execute(&buf, pg); err != nil {
		p.log.Error("waiting page template", "err", err)
		p.plainPage(w, status, pg.T.Error)
		return
	}
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// place returns the visitor's entry in room: from the ticket the request
// carries (a Bearer ticket, else the room's ticket cookie), else by entering
// the queue as the anonymous visitor of the usher_vid cookie (set when
// missing). A visitor whose place is gone (left, released, expired) enters
// again at the back. ticket is set only when a new one was issued.
func (p *core) place(ctx context.Context, w http.ResponseWriter, r *http.Request, room string) (visitor, ticket string, e queue.Entry, err error) {
	var mint *http.Cookie // a new visitor's cookie, set once it has its place
	lane, err := gate.EntryLane(p.c.Keys, room, r.URL.Query().Get(LaneParam))
	if err != nil {
		return "", "", queue.Entry{}, err
	}
	if t, ok := p.ticketOf(r, room); ok {
		e, err = gate.Poll(ctx, p.c.Queue, r, room, t)
		if err == nil && p.c.Queue.Reticket(room, e, t.Seq, t.IssuedAt) {
			return t.Visitor, p.issueTicket(w, room, t.Visitor, e), e, nil // the next polls stay cheap
		}
		if err != nil || e.Status != queue.Gone {
			return t.Visitor, "", e, err
		}
		visitor = t.Visitor
	} else {
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			return "", "", queue.Entry{}, ErrNoPlace
		}
		q := r.URL.Query()
		en, err := p.door().Admit(ctx, r, room, gate.Credentials{Invite: q.Get(InviteParam), Identity: q.Get(IdentityParam)})
		if err != nil {
			return "", "", queue.Entry{}, err
		}
		visitor, mint = en.Visitor, en.Cookie
	}
	e, _, err = gate.Enter(ctx, p.c.Queue, room, visitor, lane)
	if err != nil {
		return "", "", queue.Entry{}, err
	}
	if mint != nil {
		http.SetCookie(w, mint)
	}
	return visitor, p.issueTicket(w, room, visitor, e), e, nil
}

// door checks the entries of visitors without a ticket: credentials and
// the flood guard, as for the API's entries.
func (p *core) door() gate.Door {
	return gate.Door{Queue: p.c.Queue, Keys: p.c.Keys, Identity: p.c.Identity, Flood: p.c.Flood, SecureCookie: p.secure}
}

// issueTicket signs a ticket for the visitor's place and sets the room's
// ticket cookie.
func (p *core) issueTicket(w http.ResponseWriter, room, visitor string, e queue.Entry) string {
	ticket, c := gate.IssueTicket(p.c.Queue, p.c.Keys, room, visitor, e, wire.RoomTicketCookie(room), "/", p.secure)
	http.SetCookie(w, c)
	return ticket
}

// Query parameters that carry a visitor's credential to the proxy: a site
// links to a gated page as /shop/?usher_invite=<code> or
// ?usher_identity=<assertion>. The proxy enters the visitor as the invite
// or the account and sends browsers on to the same URL without them.
const (
	InviteParam   = wire.InviteParam
	IdentityParam = wire.IdentityParam
	// LaneParam carries a priority lane code: the visitor (whoever it
	// is) enters the room's priority lane.
	LaneParam = wire.LaneParam
)

// backURL is where a visitor is sent back to: the request's own URL without
// credential parameters, as a same-origin path.
func backURL(r *http.Request) string {
	u := *r.URL
	q := u.Query()
	if q.Has(InviteParam) || q.Has(IdentityParam) || q.Has(LaneParam) {
		q.Del(InviteParam)
		q.Del(IdentityParam)
		q.Del(LaneParam)
		u.RawQuery = q.Encode()
	}
	return canon.Return(u.RequestURI())
}

// ErrNoPlace answers a request of another method than GET or POST that
// would take a place without a ticket: only a page view (or the JSON protocol's POST)
// enters the queue, never a HEAD, an OPTIONS preflight or a PUT.
var ErrNoPlace = fault.New(fault.MethodNotAllowed, "only GET and POST take a place in the queue")

func (p *core) ticketOf(r *http.Request, room string) (token.Ticket, bool) {
	if raw, ok := gate.Bearer(r); ok {
		if t, err := p.c.Keys.ParseTicket(raw, room); err == nil {
			return t, true
		}
	}
	if c, err := r.Cookie(wire.RoomTicketCookie(room)); err == nil {
		if t, err := p.c.Keys.ParseTicket(c.Value, room); err == nil {
			return t, true
		}
	}
	return token.Ticket{}, false
}

// refusedRoom answers a newcomer to a room that refuses entries (err is
// queue.ErrRoomClosed): 409 with the room's state, closed or sold_out, as
// the entry answer for JSON clients and as the waiting page's state for
// browsers. Nothing to retry, so no Retry-After.
func (p *core) refusedRoom(w http.ResponseWriter, r *http.Request, room string, err error) {
	status, _ := apierror.Status(err)
	state := p.c.Queue.ViewOrDefault(room).EffectiveState()
	if !state.Refuses() { // this instance's view lags the store
		state = queue.Closed
	}
	resp := wire.EntryFor(wire.Place{Room: room, RoomState: string(state), Status: string(queue.Gone)})
	if wantsJSON(r) {
		writeEntry(w, status, resp)
		return
	}
	page := StateClosed
	if resp.State == wire.StateSoldOut {
		page = StateSoldOut
	}
	p.renderPage(w, r, status, Page{State: page, Room: room, Refresh: 2, PollAfterMS: 2000})
}

// writeEntry writes the JSON waiting protocol's answer.
func writeEntry(w http.ResponseWriter, status int, e wire.Entry) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Vary", "Accept")
	w.WriteHeader(status)
	w.Write(append(e.AppendJSON(nil), '\n'))
}

var (
	waitingCSS = template.CSS(mustRead("page/waiting.css"))
	waitingJS  = template.JS(mustRead("page/waiting.js"))
	powWorker  = mustRead("page/pow.js")
	powETag    = etag(powWorker)
)

// WorkerPath is where the proxy serves the waiting page's proof-of-work
// worker (page/pow.js), under its reserved prefix: a Worker's script must
// come from the page's own origin.
const WorkerPath = Prefix + "pow.js"

// serveWorker serves the worker script: GET and HEAD, as JavaScript that
// no browser sniffs as anything else, revalidated by its ETag so that a new
// binary's script is picked up at once.
func (p *core) serveWorker(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		p.errs.Write(w, r, apierror.ErrMethodNotAllowed)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", powETag)
	http.ServeContent(w, r, "", time.Time{}, strings.NewReader(powWorker))
}

func etag(s string) string {
	sum := sha256.Sum256([]byte(s))
	return fmt.Sprintf(`"%x"`, sum[:8])
}

func mustRead(name string) string {
	b, err := pages.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// wantsJSON reports whether the client asked for JSON rather than HTML.
func wantsJSON(r *http.Request) bool {
	for part := range strings.SplitSeq(r.Header.Get("Accept"), ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "text/html":
			return false
		case "application/json":
			return true
		}
	}
	return false
}
