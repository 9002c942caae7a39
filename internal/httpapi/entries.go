package httpapi

import (
	"errors"
	"net/http"
	"time"

	"usher/internal/apierror"
	"usher/internal/gate"
	"usher/internal/queue"
	"usher/internal/token"
)

// Cookies set for browser visitors.
const (
	// VisitorCookie holds the signed anonymous visitor id, for all rooms.
	VisitorCookie = "usher_vid"
	// TicketCookie holds the ticket; its path is the room's entries path,
	// so each room has its own.
	TicketCookie     = "usher_ticket"
	visitorCookieAge = 30 * 24 * time.Hour
)

// Visitor states in entry responses.
const (
	StateWaiting  = "waiting"
	StateAdmitted = "admitted"
	StateExpired  = "expired"
	StateClosed   = "closed"
	StateSoldOut  = "sold_out"
)

// EntryResponse is the body of enter and status responses.
type EntryResponse struct {
	Room   string `json:"room"`
	Ticket string `json:"ticket,omitempty"`
	// State is waiting, admitted, expired (the place or slot was lost),
	// closed (the room is closed and will admit nobody) or sold_out (the
	// same, because the sale sold out).
	State string `json:"state"`
	// RoomState is open, paused or closed.
	RoomState  string `json:"room_state"`
	Position   int64  `json:"position"`
	Ahead      int64  `json:"ahead"`
	ETASeconds int64  `json:"eta_seconds"`
	// PollAfterMS is when to poll again, with jitter already applied.
	PollAfterMS   int64      `json:"poll_after_ms"`
	Pass          string     `json:"pass,omitempty"`
	PassExpiresAt *time.Time `json:"pass_expires_at,omitempty"`
}

type enterRequest struct {
	VisitorID string `json:"visitor_id"`
}

func (s *server) enter() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		room := r.PathValue("room")
		req, err := decode[enterRequest](w, r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		visitor := req.VisitorID
		switch {
		case visitor != "" && !s.isAdmin(r):
			s.errs.Write(w, r, apierror.ErrAdminOnly.Detail("visitor_id: accepted only with the admin key"))
			return
		case visitor == "":
			visitor = s.browserVisitor(w, r)
		}
		e, created, err := s.Queue.Enter(r.Context(), room, visitor)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		ticket := s.Keys.SignTicket(token.Ticket{Room: room, Visitor: visitor, Seq: e.Seq, IssuedAt: s.Queue.Now()})
		http.SetCookie(w, &http.Cookie{
			Name: TicketCookie, Value: ticket, Path: "/api/v1/rooms/" + room + "/",
			MaxAge: int(token.TicketTTL.Seconds()), HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode,
		})
		status := http.StatusOK
		if created {
			status = http.StatusCreated
		}
		s.respond(w, r, status, room, ticket, e)
	})
}

// browserVisitor returns the visitor id from the signed cookie, or a new
// random one set in a new cookie.
func (s *server) browserVisitor(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(VisitorCookie); err == nil {
		if id, err := s.Keys.ParseVisitor(c.Value); err == nil {
			return id
		}
	}
	id := token.NewVisitorID()
	http.SetCookie(w, &http.Cookie{
		Name: VisitorCookie, Value: s.Keys.SignVisitor(id), Path: "/",
		MaxAge: int(visitorCookieAge.Seconds()), HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode,
	})
	return id
}

// ticket returns the request's ticket for room: Bearer header, else cookie.
func ticketFrom(r *http.Request) (string, error) {
	if tok, ok := gate.Bearer(r); ok {
		return tok, nil
	}
	if c, err := r.Cookie(TicketCookie); err == nil {
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
		e, _, err := s.Queue.Status(r.Context(), room, t.Visitor, t.Seq)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		s.respond(w, r, http.StatusOK, room, "", e)
	})
}

// respond writes an EntryResponse for e.
func (s *server) respond(w http.ResponseWriter, r *http.Request, status int, room, ticket string, e queue.Entry) {
	v, ok := s.Queue.View(room)
	if !ok {
		v = queue.View{Stats: queue.Stats{Settings: queue.DefaultSettings()}, Rate: queue.DefaultSettings().AdmitRate}
	}
	resp := EntryResponse{Room: room, Ticket: ticket, RoomState: string(v.Settings.State)}
	switch e.Status {
	case queue.Waiting:
		resp.State = StateWaiting
		if v.Settings.State.Refuses() {
			resp.State = string(v.Settings.State)
		}
		resp.Position, resp.Ahead = e.Position, e.Position-1
		eta := queue.ETA(v, resp.Ahead)
		resp.ETASeconds = int64(eta.Round(time.Second) / time.Second)
		resp.PollAfterMS = queue.PollAfter(eta, e.Position <= queue.ExactWithin(v)).Milliseconds()
	case queue.Active:
		exp := e.ExpiresAt.Truncate(time.Second).UTC() // a pass's exp is whole seconds
		pass, err := s.Keys.SignPass(token.Pass{Room: room, Visitor: e.Visitor, ExpiresAt: exp})
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		resp.State, resp.Pass, resp.PassExpiresAt = StateAdmitted, pass, &exp
		http.SetCookie(w, gate.PassCookieFor(pass, exp, s.secure))
	default:
		resp.State = StateExpired
		if v.Settings.State.Refuses() {
			resp.State = string(v.Settings.State)
		}
	}
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
			{Name: TicketCookie, Path: "/api/v1/rooms/" + room + "/"},
			{Name: gate.PassCookie, Path: "/"},
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
	for _, name := range []string{TicketCookie, gate.PassCookie} {
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

// PassResponse is the body of GET /api/v1/rooms/{room}/pass.
type PassResponse struct {
	Room      string    `json:"room"`
	Visitor   string    `json:"visitor"`
	ExpiresAt time.Time `json:"expires_at"`
	// Pass is the pass to use from now on (renewed when half used).
	Pass string `json:"pass"`
}

func (s *server) pass() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, _ := gate.FromContext(r.Context())
		encode(w, http.StatusOK, PassResponse{Room: a.Room, Visitor: a.Visitor, ExpiresAt: a.ExpiresAt.Truncate(time.Second).UTC(), Pass: a.Pass})
	})
}
