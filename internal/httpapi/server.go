// Package httpapi is usher's JSON API v1: entering and polling the queue,
// leaving, the admin room endpoints, the pass check, JWKS, health and
// metrics. Every route is listed in routes.go with its audience: New
// returns a handler of the visitors' routes, on which the operators' routes
// (the admin key's) do not exist, and one of every route for the admin
// listener. Every error goes through the one table in package apierror.
package httpapi

import (
	"context"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"usher/internal/analytics"
	"usher/internal/apierror"
	"usher/internal/event"
	"usher/internal/flood"
	"usher/internal/gate"
	"usher/internal/identity"
	"usher/internal/queue"
	"usher/internal/sale"
	"usher/internal/token"
	"usher/internal/wire"
)

// Config is what the server needs. Queue, Keys, AdminKey and Registry are
// required.
type Config struct {
	Queue *queue.Queue
	Keys  *token.Keyring
	// AdminKey authorizes the admin endpoints and trusted visitor ids.
	AdminKey string
	Registry *prometheus.Registry
	Logger   *slog.Logger
	// InsecureCookies drops the Secure attribute from cookies (plain HTTP
	// during development). Secure is the default.
	InsecureCookies bool
	// FailOpen lets the gate pass signed passes when the store is down.
	FailOpen bool
	// Identity verifies the identity assertions of entries (the body's
	// "identity"); nil refuses every assertion.
	Identity *identity.Verifier
	// Flood guards entries that would take a new place (per-client
	// limit, proof of work; gate.Door); nil lets every one in.
	Flood *flood.Guard
	// Sale serves the booking routes (seats, holds, reservations, catalog
	// admin); nil leaves them out.
	Sale *sale.Service
	// Analytics serves a room's analytics and recent events (the
	// collector's tables); nil answers them with analytics_disabled.
	Analytics *analytics.Analytics
	// Events receives settings_changed events (PUT /api/v1/rooms/{room});
	// nil emits none.
	Events event.Emitter
	// Bypass lists the edge's bypass rules (GET /api/v1/bypass); nil: none.
	Bypass func() []wire.BypassRule
}

type server struct {
	Config
	errs   apierror.Writer
	gate   *gate.Gate
	door   gate.Door
	secure bool
	bufs   sync.Pool // *[]byte: entry responses' JSON
	// streams bounds the open reservation event streams.
	streams *streams
}

// Handlers are the API's handlers, one per listener.
type Handlers struct {
	// Visitors serves the visitors' routes; an operators' route answers
	// there as if it did not exist (404, or 405 where its path has a
	// visitors' method).
	Visitors http.Handler
	// Operators serves every route: the admin listener.
	Operators http.Handler
}

// New returns the API's handlers. It starts nothing.
func New(c Config) Handlers {
	s := newServer(c)
	routes := s.routes()
	count := s.instrument(c.Registry)
	return Handlers{
		Visitors:  count(compress(s.mux(routes, Visitors))),
		Operators: count(compress(s.mux(routes, Operators))),
	}
}

// NewServer returns the handler of every route, as one listener serves
// them (New(c).Operators). It starts nothing.
func NewServer(c Config) http.Handler { return New(c).Operators }

func newServer(c Config) *server {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	s := &server{
		Config:  c,
		errs:    apierror.Writer{Log: c.Logger, Counts: apierror.NewCounts(c.Registry)},
		secure:  !c.InsecureCookies,
		streams: newStreams(StreamsPerVisitor, StreamsTotal),
	}
	s.door = gate.Door{Queue: c.Queue, Keys: c.Keys, Identity: c.Identity, Flood: c.Flood, SecureCookie: s.secure}
	s.gate = gate.New(c.Queue, c.Keys, gate.Options{
		Room:         func(r *http.Request) string { return r.PathValue("room") },
		FailOpen:     c.FailOpen,
		SecureCookie: s.secure,
		Errors:       s.errs,
		Logger:       c.Logger,
		Unmeasured:   true, // its one handler, /pass, is usher's own
	})
	return s
}

// instrument returns a wrapper that counts requests by route pattern and
// status, into one counter for every handler it wraps.
func (s *server) instrument(reg prometheus.Registerer) func(http.Handler) http.Handler {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "usher_http_requests_total", Help: "HTTP requests by route pattern and status.",
	}, []string{"route", "status"})
	reg.MustRegister(requests)
	// The resolved counters, by route and status: a status poll then costs
	// one map read instead of hashing its labels.
	type key struct {
		route  string
		status int
	}
	var counters sync.Map // key → prometheus.Counter
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := &gate.StatusWriter{ResponseWriter: w}
			next.ServeHTTP(rec, r)
			k := key{r.Pattern, rec.Status()}
			c, ok := counters.Load(k)
			if !ok {
				c, _ = counters.LoadOrStore(k, requests.WithLabelValues(k.route, strconv.Itoa(k.status)))
			}
			c.(prometheus.Counter).Inc()
		})
	}
}

// metrics serves the registry, an operators' route: the metrics name
// every room and count its visitors. Prometheus sends the admin key as a
// bearer token, or scrapes the separate listener of --metrics-addr.
func (s *server) metrics() http.Handler {
	return promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{})
}

func (s *server) healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		encode(w, http.StatusOK, map[string]string{"status": "ok"})
	})
}

// readyz answers 200 when the store answers within a second.
func (s *server) readyz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if _, err := s.Queue.Rooms(ctx); err != nil {
			s.errs.Write(w, r, err)
			return
		}
		encode(w, http.StatusOK, map[string]string{"status": "ready"})
	})
}

func (s *server) jwks() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		w.Write(s.Keys.JWKS())
	})
}

// isAdmin reports whether the request carries the admin key.
func (s *server) isAdmin(r *http.Request) bool {
	tok, ok := gate.Bearer(r)
	return ok && subtle.ConstantTimeCompare([]byte(tok), []byte(s.AdminKey)) == 1
}

// adminOnly is nil for a request with the admin key, else why not: no
// bearer token (ErrAdminOnly), or another one (ErrAdminKeyWrong).
func (s *server) adminOnly(r *http.Request) error {
	switch _, sent := gate.Bearer(r); {
	case s.isAdmin(r):
		return nil
	case sent:
		return apierror.ErrAdminKeyWrong
	default:
		return apierror.ErrAdminOnly
	}
}

// admin wraps an admin-only handler.
func (s *server) admin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.adminOnly(r); err != nil {
			s.errs.Write(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *server) fail(err error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.errs.Write(w, r, err) })
}
