package httpapi

import (
	"errors"
	"net/http"
	"time"

	"usher/internal/apierror"
	"usher/internal/gate"
	"usher/internal/queue"
	"usher/internal/token"
	"usher/internal/wire"
)

func (s *server) enter() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		room := r.PathValue("room")
		req, err := decode[wire.EnterRequest](w, r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		shown, err := gate.Shown(r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		lane, err := gate.EntryLane(s.Keys, room, req.Lane)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		visitor := req.VisitorID
		var mint *http.Cookie // a new visitor's cookie, set once it has its place
		switch {
		case countSet(req.VisitorID, req.Identity, req.Invite) > 1:
			s.errs.Write(w, r, queue.ErrInvalid.Detail("visitor_id, identity and invite: send one of them"))
			return
		case visitor != "":
			if !s.isAdmin(r) {
				s.errs.Write(w, r, apierror.ErrAdminOnly.Detail("visitor_id: accepted only with the admin key"))
				return
			}
		default:
			en, err := s.door.Admit(r.Context(), r, room, gate.Credentials{
				Invite: req.Invite, Identity: req.Identity, Holds: s.ticketVisitor(r, room)})
			if err != nil {
				s.errs.Write(w, r, err)
				return
			}
			visitor, mint = en.Visitor, en.Cookie
		}
		e, created, err := gate.Enter(r.Context(), s.Queue, room, visitor, lane)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		if mint != nil {
			http.SetCookie(w, mint)
		}
		if !created { // the visitor's own place: the one it showed
			e = s.Queue.HoldPlace(room, e, e.Seq, shown)
		}
		ticket := s.issueTicket(w, room, visitor, e)
		status := http.StatusOK
		if created {
			status = http.StatusCreated
		}
		s.respond(w, r, status, room, ticket, e)
	})
}

// issueTicket signs a ticket for the visitor's place e and sets its
// cookie, scoped to the room's API paths.
func (s *server) issueTicket(w http.ResponseWriter, room, visitor string, e queue.Entry) string {
	ticket, c := gate.IssueTicket(s.Queue, s.Keys, room, visitor, e, wire.TicketCookie, "/api/v1/rooms/"+room+"/", s.secure)
	http.SetCookie(w, c)
	return ticket
}

func countSet(ss ...string) int {
	n := 0
	for _, s := range ss {
		if s != "" {
			n++
		}
	}
	return n
}

// ticketVisitor names the visitor of the valid ticket for room that r
// carries, "" for none.
func (s *server) ticketVisitor(r *http.Request, room string) string {
	raw, err := ticketFrom(r)
	if err != nil {
		return ""
	}
	t, err := s.Keys.ParseTicket(raw, room)
	if err != nil {
		return ""
	}
	return t.Visitor
}

// ticket returns the request's ticket for room: Bearer header, else cookie.
func ticketFrom(r *http.Request) (string, error) {
	if tok, ok := gate.Bearer(r); ok {
		return tok, nil
	}
	if c, err := r.Cookie(wire.TicketCookie); err == nil {
		return c.Value, nil
	}
	return "", apierror.ErrTokenMissing
}

func (s *server) status() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		room := r.PathValue("room")
		raw, err := ticketFrom(r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		t, err := s.Keys.ParseTicket(raw, room)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		e, err := gate.Poll(r.Context(), s.Queue, r, room, t)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		ticket := ""
		if s.Queue.Reticket(room, e, t.Seq, t.IssuedAt) {
			ticket = s.issueTicket(w, room, t.Visitor, e) // the next polls stay cheap
		}
		s.respond(w, r, http.StatusOK, room, ticket, e)
	})
}

// respond writes the entry answer for e.
func (s *server) respond(w http.ResponseWriter, r *http.Request, status int, room, ticket string, e queue.Entry) {
	p := s.Queue.Place(room, e)
	queue.Issued(&p, ticket)
	if e.Status == queue.Active {
		pass, exp, c, err := gate.IssuePass(s.Keys, room, e.Visitor, e.ExpiresAt, s.secure)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		p.Pass, p.PassExpiresAt = pass, exp
		http.SetCookie(w, c)
	}
	resp := wire.EntryFor(p)
	w.Header()["Content-Type"] = jsonContentType
	w.Header()["Cache-Control"] = noStore
	w.WriteHeader(status)
	buf, _ := s.bufs.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	*buf = append(resp.AppendJSON((*buf)[:0]), '\n')
	w.Write(*buf)
	s.bufs.Put(buf)
}

// Pre-canonicalized header values for the status poll's hot path.
var (
	jsonContentType = []string{"application/json"}
	noStore         = []string{"no-store"}
)

func (s *server) leave() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		room := r.PathValue("room")
		visitor, err := s.visitorOf(r, room)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		if err := s.Queue.Leave(r.Context(), room, visitor); err != nil {
			s.errs.Write(w, r, err)
			return
		}
		for _, c := range []*http.Cookie{
			{Name: wire.TicketCookie, Path: "/api/v1/rooms/" + room + "/"},
			{Name: wire.PassCookie, Path: "/"},
		} {
			c.MaxAge, c.HttpOnly, c.Secure, c.SameSite = -1, true, s.secure, http.SameSiteLaxMode
			http.SetCookie(w, c)
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// visitorOf returns the visitor named by the first valid token the request
// carries: the Authorization header (a ticket or a pass), the ticket cookie,
// the pass cookie. A finishing admitted visitor may hold only the pass.
func (s *server) visitorOf(r *http.Request, room string) (string, error) {
	var candidates []string
	if tok, ok := gate.Bearer(r); ok {
		candidates = append(candidates, tok)
	}
	for _, name := range []string{wire.TicketCookie, wire.PassCookie} {
		if c, err := r.Cookie(name); err == nil {
			candidates = append(candidates, c.Value)
		}
	}
	firstErr := error(apierror.ErrTokenMissing)
	for i, raw := range candidates {
		t, terr := s.Keys.ParseTicket(raw, room)
		if terr == nil {
			return t.Visitor, nil
		}
		p, perr := s.Keys.ParsePass(raw, room)
		if perr == nil {
			return p.Visitor, nil
		}
		if i == 0 { // report the more telling of the two errors
			firstErr = terr
			if errors.Is(terr, token.ErrInvalid) {
				firstErr = perr
			}
		}
	}
	return "", firstErr
}

func (s *server) pass() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, _ := gate.FromContext(r.Context())
		encode(w, http.StatusOK, wire.Pass{Room: a.Room, Visitor: a.Visitor, ExpiresAt: a.ExpiresAt.Truncate(time.Second).UTC(), Pass: a.Pass})
	})
}
