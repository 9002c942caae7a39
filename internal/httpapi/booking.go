package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"usher/internal/booking"
	"usher/internal/gate"
	"usher/internal/queue"
	"usher/internal/sale"
	"usher/internal/token"
	"usher/internal/wire"
)

// scheduleID parses the {id} path value.
func scheduleID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, sale.ErrInvalid.Detail("schedule id %q: want a positive integer", r.PathValue("id"))
	}
	return id, nil
}

// gated resolves the request's schedule and runs the gate for its room. On
// false the response is written.
func (s *server) gated(w http.ResponseWriter, r *http.Request, id int64) (gate.Admitted, bool) {
	sch, err := s.Sale.Schedule(r.Context(), id)
	if err != nil {
		s.errs.Write(w, r, err)
		return gate.Admitted{}, false
	}
	return s.gate.Check(w, r, sch.Room)
}

// gatedPath is gated for the schedule of the {id} path value.
func (s *server) gatedPath(w http.ResponseWriter, r *http.Request) (int64, gate.Admitted, bool) {
	id, err := scheduleID(r)
	if err != nil {
		s.errs.Write(w, r, err)
		return 0, gate.Admitted{}, false
	}
	a, ok := s.gated(w, r, id)
	return id, a, ok
}

// readPath is gatedPath for the reads that the admin key may make too, for
// support work (the seat map, the stock): with the admin key the schedule
// need only exist, and no slot is renewed.
func (s *server) readPath(w http.ResponseWriter, r *http.Request) (int64, bool) {
	if !s.isAdmin(r) {
		id, _, ok := s.gatedPath(w, r)
		return id, ok
	}
	id, err := scheduleID(r)
	if err == nil {
		_, err = s.Sale.Schedule(r.Context(), id)
	}
	if err != nil {
		s.errs.Write(w, r, err)
		return 0, false
	}
	return id, true
}

func (s *server) seats() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := s.readPath(w, r)
		if !ok {
			return
		}
		m, err := s.Sale.SeatMap(r.Context(), id)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		w.Header()["Content-Type"] = jsonContentType
		w.Header()["Cache-Control"] = noStore
		if acceptsGzip(r) {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(m.Gzip())
			return
		}
		w.Write(m.JSON())
	})
}

func (s *server) hold() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := scheduleID(r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		req, err := decode[wire.HoldRequest](w, r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		kinds := 0
		for _, set := range []bool{req.SeatIDs != nil, req.Quantity != nil, req.Count != nil} {
			if set {
				kinds++
			}
		}
		if kinds > 1 || (req.Count == nil && (req.Section != "" || req.MinPrice != 0 || req.MaxPrice != 0)) {
			s.errs.Write(w, r, sale.ErrInvalid.Detail("want one of seat_ids, quantity or count; section and prices go with count"))
			return
		}
		a, ok := s.gated(w, r, id)
		if !ok {
			return
		}
		if req.Count != nil {
			h, seats, err := s.Sale.HoldBest(r.Context(), id, a.Visitor, sale.BestRequest{
				Count: *req.Count, Section: req.Section, MinPrice: req.MinPrice, MaxPrice: req.MaxPrice})
			if err != nil {
				s.errs.Write(w, r, err)
				return
			}
			encode(w, http.StatusCreated, wire.Hold{HoldID: h.ID, ScheduleID: id, SeatIDs: seats, ExpiresAt: h.ExpiresAt.UTC()})
			return
		}
		if req.Quantity != nil {
			h, err := s.Sale.HoldStock(r.Context(), id, a.Visitor, *req.Quantity)
			if err != nil {
				s.errs.Write(w, r, err)
				return
			}
			encode(w, http.StatusCreated, wire.Hold{HoldID: h.ID, ScheduleID: id, Quantity: h.Quantity, ExpiresAt: h.ExpiresAt.UTC()})
			return
		}
		h, err := s.Sale.Hold(r.Context(), id, a.Visitor, req.SeatIDs)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		encode(w, http.StatusCreated, wire.Hold{HoldID: h.ID, ScheduleID: id, SeatIDs: req.SeatIDs, ExpiresAt: h.ExpiresAt.UTC()})
	})
}

func (s *server) releaseHold() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, a, ok := s.gatedPath(w, r)
		if !ok {
			return
		}
		if err := s.Sale.Release(r.Context(), id, a.Visitor, r.PathValue("hold")); err != nil {
			s.errs.Write(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func reservationResponse(r booking.Reservation) wire.Reservation {
	return wire.Reservation{
		ReservationID: r.ID, ScheduleID: r.ScheduleID, SeatIDs: r.SeatIDs, Quantity: r.Quantity, Status: string(r.Status),
		Reason: r.Reason, CreatedAt: r.CreatedAt, DecidedAt: r.DecidedAt,
	}
}

func (s *server) reserve() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := decode[wire.ReserveRequest](w, r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		if req.ScheduleID <= 0 {
			s.errs.Write(w, r, sale.ErrInvalid.Detail("schedule_id: want a positive integer"))
			return
		}
		if req.HoldID != "" && req.SeatIDs != nil {
			s.errs.Write(w, r, sale.ErrInvalid.Detail("want seat_ids or hold_id, not both"))
			return
		}
		// A retry of a reservation already made answers without the gate: the
		// order may have finished the visitor's session.
		if sch, err := s.Sale.Schedule(r.Context(), req.ScheduleID); err == nil && req.IdempotencyKey != "" {
			if visitor, err := s.visitorOf(r, sch.Room); err == nil {
				if res, err := s.Sale.Lookup(r.Context(), visitor, req.IdempotencyKey); err == nil {
					encode(w, http.StatusAccepted, reservationResponse(res))
					return
				}
			}
		}
		a, ok := s.gated(w, r, req.ScheduleID)
		if !ok {
			return
		}
		var res booking.Reservation
		if req.HoldID != "" {
			res, _, err = s.Sale.ReserveStock(r.Context(), a.Visitor, req.ScheduleID, req.HoldID, req.IdempotencyKey)
		} else {
			res, _, err = s.Sale.Reserve(r.Context(), a.Visitor, req.ScheduleID, req.SeatIDs, req.IdempotencyKey)
		}
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		encode(w, http.StatusAccepted, reservationResponse(res))
	})
}

// reservationFor returns the reservation in the path if the request's
// ticket or pass for the reservation's room names its visitor, or if it
// carries the admin key (support work). Liveness is not required: the
// visitor may have finished.
func (s *server) reservationFor(r *http.Request) (booking.Reservation, error) {
	id := r.PathValue("id")
	if !queue.ValidVisitorID(id) {
		return booking.Reservation{}, sale.ErrInvalid.Detail("reservation id: want 1 to %d printable ASCII bytes without spaces", queue.MaxVisitorID)
	}
	if s.isAdmin(r) {
		return s.Sale.Owner(r.Context(), id)
	}
	// The token is bound to the reservation's room, which only the
	// reservation tells; so first check that the request carries a token
	// this server signed (for any room), so that a stranger learns nothing,
	// not even whether the id exists.
	if _, err := s.visitorOf(r, ""); err != nil && !errors.Is(err, token.ErrWrongRoom) {
		return booking.Reservation{}, err
	}
	owner, err := s.Sale.Owner(r.Context(), id)
	if err != nil {
		return booking.Reservation{}, err
	}
	sch, err := s.Sale.Schedule(r.Context(), owner.ScheduleID)
	if err != nil {
		return booking.Reservation{}, err
	}
	visitor, err := s.visitorOf(r, sch.Room)
	if err != nil {
		return booking.Reservation{}, err
	}
	return s.Sale.Reservation(r.Context(), visitor, id)
}

func (s *server) getReservation() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := s.reservationFor(r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		if s.isAdmin(r) { // support work: with the visitor
			encode(w, http.StatusOK, wire.AdminReservation{Reservation: reservationResponse(res), Visitor: res.Visitor})
			return
		}
		encode(w, http.StatusOK, reservationResponse(res))
	})
}

// reservationEvents streams the reservation's states as server-sent events
// ("event: reservation", data the JSON of GET /reservations/{id}) until it
// is decided; a comment line every 15 s keeps proxies from closing it.
func (s *server) reservationEvents() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := s.reservationFor(r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		release, err := s.streams.acquire(res.Visitor)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		defer release()
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		states, err := s.Sale.Watch(ctx, res.Visitor, res.ID)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		serveEvents(ctx, w, states, func(st booking.Reservation) sse {
			b, _ := json.Marshal(reservationResponse(st))
			return sse{event: "reservation", data: b}
		})
	})
}

func (s *server) createConcert() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := decode[wire.ConcertRequest](w, r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		c, err := s.Sale.CreateConcert(r.Context(), req.Title)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		encode(w, http.StatusCreated, c)
	})
}

func (s *server) createSchedule() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		concert, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil || concert <= 0 {
			s.errs.Write(w, r, sale.ErrInvalid.Detail("concert id: want a positive integer"))
			return
		}
		req, err := decode[wire.ScheduleRequest](w, r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		sch, err := s.Sale.CreateSchedule(r.Context(), booking.Schedule{ConcertID: concert, StartsAt: req.StartsAt, Room: req.Room}, req.SaleOpensAt)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		encode(w, http.StatusCreated, sch)
	})
}

func (s *server) addSeats() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := scheduleID(r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		req, err := decode[sale.SeatLayout](w, r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		ids, err := s.Sale.AddSeats(r.Context(), id, req)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		encode(w, http.StatusCreated, map[string]any{"schedule_id": id, "added": len(ids)})
	})
}

// setStock creates or sets a schedule's general-admission stock (admin).
func (s *server) setStock() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := scheduleID(r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		req, err := decode[wire.StockRequest](w, r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		if req.Total == nil {
			s.errs.Write(w, r, sale.ErrInvalid.Detail("total: required"))
			return
		}
		lvl, err := s.Sale.SetStock(r.Context(), id, *req.Total)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		encode(w, http.StatusOK, lvl)
	})
}

func (s *server) stock() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := s.readPath(w, r)
		if !ok {
			return
		}
		n, err := s.Sale.Stock(r.Context(), id)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		encode(w, http.StatusOK, wire.Stock{ScheduleID: id, Available: n})
	})
}
