package httpapi

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"

	"usher/internal/booking"
	"usher/internal/queue"
	"usher/internal/sale"
	"usher/internal/wire"
)

// The operator's reads: the catalog (public: a site shows it), a
// schedule's reservations and sales (admin). Lists are paged: a stable
// order by id, ?limit= (1 to MaxLimit, default DefaultLimit) and
// ?after=<cursor>, the opaque "next" of the previous page; "next" is
// absent on the last page.

// Page sizes of the paged lists.
const (
	DefaultLimit = 100
	MaxLimit     = 500
)

// Cursor kinds: a cursor of one list is refused by another.
const (
	cursorConcerts     = "c"
	cursorSchedules    = "s"
	cursorReservations = "r"
)

// makeCursor returns the opaque cursor after key in a list of kind.
func makeCursor(kind, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + key))
}

// pageParams reads ?limit= and ?after= (the cursor's key, "" for the first
// page) of a list of kind.
func pageParams(r *http.Request, kind string) (key string, limit int, err error) {
	limit = DefaultLimit
	q := r.URL.Query()
	if q.Has("limit") {
		n, perr := strconv.Atoi(q.Get("limit"))
		if perr != nil || n < 1 || n > MaxLimit {
			return "", 0, sale.ErrInvalid.Detail("limit: want 1 to %d", MaxLimit)
		}
		limit = n
	}
	if !q.Has("after") {
		return "", limit, nil
	}
	b, derr := base64.RawURLEncoding.DecodeString(q.Get("after"))
	k, ok := strings.CutPrefix(string(b), kind+":")
	if derr != nil || !ok || k == "" {
		return "", 0, sale.ErrInvalid.Detail("after: not a cursor of this list")
	}
	return k, limit, nil
}

// idCursor reads the paging parameters of a list ordered by numeric id.
func idCursor(r *http.Request, kind string) (after int64, limit int, err error) {
	key, limit, err := pageParams(r, kind)
	if err != nil || key == "" {
		return 0, limit, err
	}
	after, perr := strconv.ParseInt(key, 10, 64)
	if perr != nil || after < 1 {
		return 0, 0, sale.ErrInvalid.Detail("after: not a cursor of this list")
	}
	return after, limit, nil
}

// pageOf cuts rows read with limit+1 to limit and returns the cursor of
// the next page ("" when none).
func pageOf[T any](rows []T, limit int, kind string, key func(T) string) ([]T, string) {
	if len(rows) <= limit {
		return rows, ""
	}
	rows = rows[:limit]
	return rows, makeCursor(kind, key(rows[limit-1]))
}

func concertResponse(c booking.Concert) wire.Concert {
	return wire.Concert{ConcertID: c.ID, Title: c.Title, CreatedAt: c.CreatedAt.UTC()}
}

func scheduleResponse(sch booking.Schedule) wire.Schedule {
	return wire.Schedule{ScheduleID: sch.ID, ConcertID: sch.ConcertID, StartsAt: sch.StartsAt.UTC(), Room: sch.Room}
}

// positiveID parses a path or query id.
func positiveID(name, v string) (int64, error) {
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, sale.ErrInvalid.Detail("%s %q: want a positive integer", name, v)
	}
	return id, nil
}

func (s *server) listConcerts() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		after, limit, err := idCursor(r, cursorConcerts)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		rows, err := s.Sale.Concerts(r.Context(), after, limit+1)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		rows, next := pageOf(rows, limit, cursorConcerts, func(c booking.Concert) string { return strconv.FormatInt(c.ID, 10) })
		out := wire.ConcertList{Concerts: make([]wire.Concert, len(rows)), Next: next}
		for i, c := range rows {
			out.Concerts[i] = concertResponse(c)
		}
		encode(w, http.StatusOK, out)
	})
}

func (s *server) getConcert() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := positiveID("concert id", r.PathValue("id"))
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		c, err := s.Sale.Concert(r.Context(), id)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		encode(w, http.StatusOK, concertResponse(c))
	})
}

func (s *server) listSchedules() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var concert int64
		if q := r.URL.Query(); q.Has("concert") {
			var err error
			if concert, err = positiveID("concert", q.Get("concert")); err != nil {
				s.errs.Write(w, r, err)
				return
			}
		}
		after, limit, err := idCursor(r, cursorSchedules)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		rows, err := s.Sale.Schedules(r.Context(), concert, after, limit+1)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		rows, next := pageOf(rows, limit, cursorSchedules, func(sch booking.Schedule) string { return strconv.FormatInt(sch.ID, 10) })
		out := wire.ScheduleList{Schedules: make([]wire.Schedule, len(rows)), Next: next}
		for i, sch := range rows {
			out.Schedules[i] = scheduleResponse(sch)
		}
		encode(w, http.StatusOK, out)
	})
}

func (s *server) getSchedule() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := scheduleID(r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		sch, err := s.Sale.Schedule(r.Context(), id)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		encode(w, http.StatusOK, scheduleResponse(sch))
	})
}

// listReservations lists a schedule's decided reservations (admin),
// ?state=confirmed or rejected.
func (s *server) listReservations() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := scheduleID(r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		var state booking.ReservationStatus
		switch q := r.URL.Query(); booking.ReservationStatus(q.Get("state")) {
		case booking.Confirmed, booking.Rejected:
			state = booking.ReservationStatus(q.Get("state"))
		case "":
			if q.Has("state") {
				s.errs.Write(w, r, sale.ErrInvalid.Detail("state: want confirmed or rejected"))
				return
			}
		default:
			s.errs.Write(w, r, sale.ErrInvalid.Detail("state: want confirmed or rejected (pending reservations are not listed)"))
			return
		}
		key, limit, err := pageParams(r, cursorReservations)
		if err == nil && key != "" && !queue.ValidVisitorID(key) {
			err = sale.ErrInvalid.Detail("after: not a cursor of this list")
		}
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		rows, err := s.Sale.Reservations(r.Context(), id, state, key, limit+1)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		rows, next := pageOf(rows, limit, cursorReservations, func(res booking.Reservation) string { return res.ID })
		out := wire.ReservationList{Reservations: make([]wire.AdminReservation, len(rows)), Next: next}
		for i, res := range rows {
			out.Reservations[i] = wire.AdminReservation{Reservation: reservationResponse(res), Visitor: res.Visitor}
		}
		encode(w, http.StatusOK, out)
	})
}

// sales answers a schedule's units sold, held and available (admin).
func (s *server) sales() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := scheduleID(r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		out, err := s.Sale.Sales(r.Context(), id)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		encode(w, http.StatusOK, out)
	})
}
