package gateway

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"html/template"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"usher/internal/apierror"
	"usher/internal/gate"
	"usher/internal/httpapi"
	"usher/internal/queue"
	"usher/internal/token"
)

//go:embed page/*.html page/waiting.css page/waiting.js page/text/*.json
var pages embed.FS

var plainTmpl = template.Must(template.ParseFS(pages, "page/plain.html"))

// TicketCookie is the prefix of the cookie that keeps a browser's place in
// a room's queue: usher_ticket_<room>, path "/".
const TicketCookie = "usher_ticket_"

// StartCookie is the prefix of the cookie that keeps the position a
// browser entered a room's queue at (usher_start_<room>), for the progress
// bar.
const StartCookie = "usher_start_"

// visitorCookieAge matches the API's anonymous visitor cookie.
const visitorCookieAge = 30 * 24 * time.Hour

// wait answers a gated request that carries no valid pass: it enters the
// queue or reads the visitor's place, then answers the state (429), or lets
// an admitted visitor through.
func (p *Proxy) wait(w http.ResponseWriter, r *http.Request, room string) {
	asJSON := wantsJSON(r)
	visitor, ticket, e, err := p.place(r.Context(), w, r, room)
	if err != nil {
		if asJSON {
			p.errs.Write(w, r, err)
			return
		}
		status, _ := apierror.Status(err)
		state := StateError
		if errors.Is(err, queue.ErrRoomClosed) {
			state = StateClosed
			if v, ok := p.c.Queue.View(room); ok && v.Settings.State == queue.SoldOut {
				state = StateSoldOut
			}
		} else {
			w.Header().Set("Retry-After", apierror.RetryAfter)
		}
		p.renderPage(w, r, status, Page{State: state, Room: room, Refresh: 2, PollAfterMS: 2000})
		return
	}
	if e.Status == queue.Active {
		exp := e.ExpiresAt.Truncate(time.Second).UTC() // a pass's exp is whole seconds
		pass, err := p.c.Keys.SignPass(token.Pass{Room: room, Visitor: visitor, ExpiresAt: exp})
		if err != nil {
			p.errs.Write(w, r, err)
			return
		}
		cookie := gate.PassCookieFor(pass, exp, p.secure)
		if asJSON { // the request that finds the visitor admitted goes through
			extra := http.Header{}
			extra.Set(gate.PassHeader, pass)
			extra.Add("Set-Cookie", cookie.String())
			p.forward(w, r, &flight{room: room, visitor: visitor, extra: extra})
			return
		}
		http.SetCookie(w, cookie)
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, r.URL.RequestURI(), http.StatusSeeOther)
		return
	}

	resp := p.entryResponse(room, ticket, e)
	retry := max(1, int(math.Ceil(float64(resp.PollAfterMS)/1000)))
	h := w.Header()
	h.Set("Retry-After", strconv.Itoa(retry))
	h.Set("Cache-Control", "no-store")
	h.Set("Vary", "Accept")
	if asJSON {
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write(append(resp.AppendJSON(nil), '\n'))
		return
	}
	p.renderPage(w, r, http.StatusTooManyRequests, p.waitingPage(w, r, room, ticket, resp, retry))
}

// waitingPage is the page of a waiting visitor. A new ticket records its
// position in the start cookie; otherwise the cookie gives it.
func (p *Proxy) waitingPage(w http.ResponseWriter, r *http.Request, room, ticket string, resp httpapi.EntryResponse, refresh int) Page {
	start := resp.Position
	if ticket != "" {
		http.SetCookie(w, &http.Cookie{
			Name: StartCookie + room, Value: strconv.FormatInt(start, 10), Path: "/",
			MaxAge: int(token.TicketTTL.Seconds()), HttpOnly: true, Secure: p.secure, SameSite: http.SameSiteLaxMode,
		})
	} else if c, err := r.Cookie(StartCookie + room); err == nil {
		if n, err := strconv.ParseInt(c.Value, 10, 64); err == nil {
			start = max(start, n)
		}
	}
	state := StateWaiting
	switch {
	case resp.State == httpapi.StateClosed:
		state = StateClosed
	case resp.State == httpapi.StateSoldOut:
		state = StateSoldOut
	case resp.RoomState == string(queue.Paused):
		state = StatePaused
	}
	return Page{
		State: state, Room: room, Position: resp.Position, Ahead: resp.Ahead,
		StartPosition: start, Progress: progress(start, resp.Position),
		ETA: etaRange(p.text, resp.ETASeconds), ETASeconds: resp.ETASeconds,
		Refresh: refresh, PollAfterMS: resp.PollAfterMS,
	}
}

// renderPage writes the waiting page template in one of its states.
func (p *Proxy) renderPage(w http.ResponseWriter, r *http.Request, status int, pg Page) {
	pg.T = p.text
	pg.UpdatedAt = p.c.Queue.Now()
	pg.URL = r.URL.RequestURI()
	pg.CSS, pg.Script = waitingCSS, waitingJS
	pg.Client = clientState{
		State: pg.State, Position: pg.Position, StartPosition: pg.StartPosition,
		PollAfterMS: pg.PollAfterMS, URL: pg.URL, Text: p.text,
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Vary", "Accept")
	var buf bytes.Buffer
	if err := p.waiting.Execute(&buf, pg); err != nil {
		p.log.Error("waiting page template", "err", err)
		p.plainPage(w, status, p.text.Error)
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
func (p *Proxy) place(ctx context.Context, w http.ResponseWriter, r *http.Request, room string) (visitor, ticket string, e queue.Entry, err error) {
	if t, ok := p.ticketOf(r, room); ok {
		e, _, err = p.c.Queue.Status(ctx, room, t.Visitor, t.Seq)
		if err != nil || e.Status != queue.Gone {
			return t.Visitor, "", e, err
		}
		visitor = t.Visitor
	} else {
		visitor = p.browserVisitor(w, r)
	}
	e, _, err = p.c.Queue.Enter(ctx, room, visitor)
	if err != nil {
		return "", "", queue.Entry{}, err
	}
	ticket = p.c.Keys.SignTicket(token.Ticket{Room: room, Visitor: visitor, Seq: e.Seq, IssuedAt: p.c.Queue.Now()})
	http.SetCookie(w, &http.Cookie{
		Name: TicketCookie + room, Value: ticket, Path: "/",
		MaxAge: int(token.TicketTTL.Seconds()), HttpOnly: true, Secure: p.secure, SameSite: http.SameSiteLaxMode,
	})
	return visitor, ticket, e, nil
}

func (p *Proxy) ticketOf(r *http.Request, room string) (token.Ticket, bool) {
	if raw, ok := gate.Bearer(r); ok {
		if t, err := p.c.Keys.ParseTicket(raw, room); err == nil {
			return t, true
		}
	}
	if c, err := r.Cookie(TicketCookie + room); err == nil {
		if t, err := p.c.Keys.ParseTicket(c.Value, room); err == nil {
			return t, true
		}
	}
	return token.Ticket{}, false
}

// browserVisitor returns the visitor id of the API's signed usher_vid
// cookie, or a new one set in that cookie.
func (p *Proxy) browserVisitor(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(httpapi.VisitorCookie); err == nil {
		if id, err := p.c.Keys.ParseVisitor(c.Value); err == nil {
			return id
		}
	}
	id := token.NewVisitorID()
	http.SetCookie(w, &http.Cookie{
		Name: httpapi.VisitorCookie, Value: p.c.Keys.SignVisitor(id), Path: "/",
		MaxAge: int(visitorCookieAge.Seconds()), HttpOnly: true, Secure: p.secure, SameSite: http.SameSiteLaxMode,
	})
	return id
}

// entryResponse is the API's shape for a waiting (or gone) entry.
func (p *Proxy) entryResponse(room, ticket string, e queue.Entry) httpapi.EntryResponse {
	v, ok := p.c.Queue.View(room)
	if !ok {
		v = queue.View{Stats: queue.Stats{Settings: queue.DefaultSettings()}, Rate: queue.DefaultSettings().AdmitRate}
	}
	resp := httpapi.EntryResponse{Room: room, Ticket: ticket, RoomState: string(v.Settings.State), State: httpapi.StateExpired}
	if e.Status == queue.Waiting {
		resp.State = httpapi.StateWaiting
		resp.Position, resp.Ahead = e.Position, e.Position-1
		eta := queue.ETA(v, resp.Ahead)
		resp.ETASeconds = int64(eta.Round(time.Second) / time.Second)
		resp.PollAfterMS = queue.PollAfter(eta, e.Position <= queue.ExactWithin(v)).Milliseconds()
	} else {
		resp.PollAfterMS = queue.PollAfter(0, true).Milliseconds()
	}
	if v.Settings.State.Refuses() {
		resp.State = string(v.Settings.State)
	}
	return resp
}

var (
	waitingCSS = template.CSS(mustRead("page/waiting.css"))
	waitingJS  = template.JS(mustRead("page/waiting.js"))
)

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
