package httpapi

import (
	"net/http"
	"slices"
	"strings"

	"usher/internal/apierror"
)

// Audience says which listener serves a route.
type Audience int

const (
	// Visitors' routes are served on both listeners.
	Visitors Audience = iota
	// Operators' routes need the admin key and are served on the admin
	// listener only: on the visitors' listener they do not exist (404, or
	// 405 where the path has a visitors' method).
	Operators
)

// Route is one route of the API: its pattern ("METHOD /path") and who it
// is for.
type Route struct {
	Pattern  string
	Audience Audience
	handler  http.Handler
}

// Routes lists the routes that New serves for c, with their audiences.
func Routes(c Config) []Route { return newServer(c).routes() }

// routes lists every route.
func (s *server) routes() []Route {
	v := func(p string, h http.Handler) Route { return Route{p, Visitors, h} }
	op := func(p string, h http.Handler) Route { return Route{p, Operators, s.admin(h)} }
	rs := []Route{
		v("GET /healthz", s.healthz()),
		v("GET /readyz", s.readyz()),
		op("GET /metrics", s.metrics()),
		v("GET /.well-known/jwks.json", s.jwks()),
		v("GET /api/v1/openapi.json", s.openAPI()),

		v("POST /api/v1/rooms/{room}/entries", s.enter()),
		v("GET /api/v1/rooms/{room}/entries/me", s.status()),
		v("DELETE /api/v1/rooms/{room}/entries/me", s.leave()),
		v("GET /api/v1/rooms/{room}/pass", s.gate.Middleware(s.pass())),
		v("GET /api/v1/rooms/{room}/draw", s.draw()),
		v("GET /api/v1/settings", s.settings()),

		op("GET /api/v1/bypass", s.bypass()),
		op("GET /api/v1/rooms", s.listRooms()),
		op("GET /api/v1/rooms/{room}", s.getRoom()),
		op("PUT /api/v1/rooms/{room}", s.putRoom()),
		op("POST /api/v1/rooms/{room}/invites", s.createInvites()),
		op("POST /api/v1/rooms/{room}/signals", s.signals()),
		op("DELETE /api/v1/rooms/{room}", s.deleteRoom()),
		op("GET /api/v1/rooms/{room}/analytics", s.roomAnalytics()),
		op("GET /api/v1/rooms/{room}/events", s.roomEvents()),
	}
	if s.Sale == nil {
		return rs
	}
	return append(rs,
		v("GET /api/v1/schedules/{id}/seats", s.seats()),
		v("GET /api/v1/schedules/{id}/seats/layout", s.seatLayout()),
		v("GET /api/v1/schedules/{id}/seats/status", s.seatStatus()),
		v("GET /api/v1/schedules/{id}/seats/events", s.seatEvents()),
		v("GET /api/v1/schedules/{id}/stock", s.stock()),
		v("POST /api/v1/schedules/{id}/holds", s.hold()),
		v("DELETE /api/v1/schedules/{id}/holds/{hold}", s.releaseHold()),
		v("POST /api/v1/reservations", s.reserve()),
		v("GET /api/v1/reservations/{id}", s.getReservation()),
		v("GET /api/v1/reservations/{id}/events", s.reservationEvents()),
		v("GET /api/v1/concerts", s.listConcerts()),
		v("GET /api/v1/concerts/{id}", s.getConcert()),
		v("GET /api/v1/schedules", s.listSchedules()),
		v("GET /api/v1/schedules/{id}", s.getSchedule()),

		op("POST /api/v1/concerts", s.createConcert()),
		op("POST /api/v1/concerts/{id}/schedules", s.createSchedule()),
		op("POST /api/v1/schedules/{id}/seats", s.addSeats()),
		op("PUT /api/v1/schedules/{id}/stock", s.setStock()),
		op("GET /api/v1/schedules/{id}/reservations", s.listReservations()),
		op("GET /api/v1/schedules/{id}/sales", s.sales()),
	)
}

// mux serves the routes for audience (Operators: every route). Each path
// served also has a method-less pattern that answers 405 in JSON, and "/"
// answers 404 in JSON.
func (s *server) mux(routes []Route, audience Audience) *http.ServeMux {
	mux := http.NewServeMux()
	var paths []string
	for _, r := range routes {
		if r.Audience > audience {
			continue
		}
		mux.Handle(r.Pattern, r.handler)
		_, path, _ := strings.Cut(r.Pattern, " ")
		if !slices.Contains(paths, path) {
			paths = append(paths, path)
		}
	}
	for _, path := range paths {
		mux.Handle(path, s.fail(apierror.ErrMethodNotAllowed))
	}
	mux.Handle("/", s.fail(apierror.ErrNotFound))
	return mux
}
