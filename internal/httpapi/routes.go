package httpapi

import (
	"net/http"

	"usher/internal/apierror"
)

// routes lists every route. Each path also has a method-less pattern that
// answers 405 in JSON, and "/" answers 404 in JSON.
func (s *server) routes(mux *http.ServeMux) {
	mux.Handle("GET /healthz", s.healthz())
	mux.Handle("GET /readyz", s.readyz())
	mux.Handle("GET /metrics", s.metrics())
	mux.Handle("GET /.well-known/jwks.json", s.jwks())
	mux.Handle("GET /api/v1/openapi.json", s.openAPI())

	mux.Handle("POST /api/v1/rooms/{room}/entries", s.enter())
	mux.Handle("GET /api/v1/rooms/{room}/entries/me", s.status())
	mux.Handle("DELETE /api/v1/rooms/{room}/entries/me", s.leave())
	mux.Handle("GET /api/v1/rooms/{room}/pass", s.gate.Middleware(s.pass()))
	mux.Handle("GET /api/v1/rooms/{room}/draw", s.draw())

	mux.Handle("GET /api/v1/settings", s.settings())
	mux.Handle("GET /api/v1/bypass", s.admin(s.bypass()))
	mux.Handle("GET /api/v1/rooms", s.admin(s.listRooms()))
	mux.Handle("GET /api/v1/rooms/{room}", s.admin(s.getRoom()))
	mux.Handle("PUT /api/v1/rooms/{room}", s.admin(s.putRoom()))
	mux.Handle("POST /api/v1/rooms/{room}/invites", s.admin(s.createInvites()))
	mux.Handle("POST /api/v1/rooms/{room}/signals", s.admin(s.signals()))
	mux.Handle("DELETE /api/v1/rooms/{room}", s.admin(s.deleteRoom()))
	mux.Handle("GET /api/v1/rooms/{room}/analytics", s.admin(s.roomAnalytics()))
	mux.Handle("GET /api/v1/rooms/{room}/events", s.admin(s.roomEvents()))

	paths := []string{
		"/healthz", "/readyz", "/metrics", "/.well-known/jwks.json", "/api/v1/openapi.json",
		"/api/v1/rooms/{room}/entries", "/api/v1/rooms/{room}/entries/me",
		"/api/v1/rooms/{room}/pass", "/api/v1/rooms/{room}/draw", "/api/v1/settings", "/api/v1/bypass", "/api/v1/rooms", "/api/v1/rooms/{room}", "/api/v1/rooms/{room}/invites",
		"/api/v1/rooms/{room}/signals", "/api/v1/rooms/{room}/analytics", "/api/v1/rooms/{room}/events",
	}
	if s.Sale != nil {
		mux.Handle("GET /api/v1/schedules/{id}/seats", s.seats())
		mux.Handle("GET /api/v1/schedules/{id}/stock", s.stock())
		mux.Handle("POST /api/v1/schedules/{id}/holds", s.hold())
		mux.Handle("DELETE /api/v1/schedules/{id}/holds/{hold}", s.releaseHold())
		mux.Handle("POST /api/v1/reservations", s.reserve())
		mux.Handle("GET /api/v1/reservations/{id}", s.getReservation())
		mux.Handle("GET /api/v1/reservations/{id}/events", s.reservationEvents())

		mux.Handle("POST /api/v1/concerts", s.admin(s.createConcert()))
		mux.Handle("POST /api/v1/concerts/{id}/schedules", s.admin(s.createSchedule()))
		mux.Handle("POST /api/v1/schedules/{id}/seats", s.admin(s.addSeats()))
		mux.Handle("PUT /api/v1/schedules/{id}/stock", s.admin(s.setStock()))

		mux.Handle("GET /api/v1/concerts", s.listConcerts())
		mux.Handle("GET /api/v1/concerts/{id}", s.getConcert())
		mux.Handle("GET /api/v1/schedules", s.listSchedules())
		mux.Handle("GET /api/v1/schedules/{id}", s.getSchedule())
		mux.Handle("GET /api/v1/schedules/{id}/reservations", s.admin(s.listReservations()))
		mux.Handle("GET /api/v1/schedules/{id}/sales", s.admin(s.sales()))
		paths = append(paths,
			"/api/v1/schedules/{id}/seats", "/api/v1/schedules/{id}/stock", "/api/v1/schedules/{id}/holds", "/api/v1/schedules/{id}/holds/{hold}",
			"/api/v1/reservations", "/api/v1/reservations/{id}", "/api/v1/reservations/{id}/events",
			"/api/v1/concerts", "/api/v1/concerts/{id}/schedules",
			"/api/v1/concerts/{id}", "/api/v1/schedules", "/api/v1/schedules/{id}",
			"/api/v1/schedules/{id}/reservations", "/api/v1/schedules/{id}/sales")
	}
	for _, path := range paths {
		mux.Handle(path, s.fail(apierror.ErrMethodNotAllowed))
	}
	mux.Handle("/", s.fail(apierror.ErrNotFound))
}
