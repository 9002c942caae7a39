// Package console is usher's operator console: an embedded single-page
// application (web/: no build step, no external assets) at /console/ on
// `usher serve` and /_usher/console/ on `usher proxy`, with the few server
// routes it needs.
//
// Contract: sign-in takes the admin key and answers an HttpOnly,
// SameSite=Strict session cookie that every instance sharing the key
// accepts; every request but GET and HEAD must carry the session's CSRF token
// and come from the same origin. Reads and writes go to the JSON API in
// process, on an allow-list (forward.go); every error answers JSON.
//
// Limits: sign-out is remembered only by the instance that signed out; live
// streams are capped per session and in all; the charts' history is the last
// hour kept by this instance alone, empty after a restart. See docs/console.md.
package console

import (
	"embed"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/apierror"
	"usher/internal/clientip"
	"usher/internal/queue"
)

//go:embed web
var web embed.FS

// Path is where the console is mounted: Mount serves it under this path
// of the handler it wraps.
const Path = "/console/"

// Config is what the console needs. Queue, API and AdminKey are required.
type Config struct {
	Queue *queue.Queue
	// API is usher's JSON API handler, to which the console forwards its
	// reads and writes with the admin key.
	API      http.Handler
	AdminKey string
	// PublicPath is the console's path as browsers see it, for the cookie's
	// Path: Path on serve, "/_usher"+Path behind the proxy (default Path).
	PublicPath string
	// InsecureCookies drops the Secure attribute (plain HTTP in
	// development), like the API's setting.
	InsecureCookies bool
	// Trusted names the proxies whose X-Forwarded-For names the client, for
	// the per-client sign-in limit.
	Trusted clientip.Trusted
	// Gatherer, when set, is read once a second for usher_eta_error_ratio
	// (this instance's ETA error by room): a registry that holds it alone
	// (queue.Metrics.ETAErrors), since a Gather costs every metric held.
	Gatherer prometheus.Gatherer
	// Booking says whether the booking backbone is served (the schedules
	// screen); the proxy has none.
	Booking bool
	// SessionTTL is how long a sign-in lasts (default DefaultSessionTTL).
	SessionTTL time.Duration
	Logger     *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Console is the console's handler and its history sampler.
type Console struct {
	c        Config
	errs     apierror.Writer
	sessions *sessions
	streams  *streams
	history  *history
	mux      *http.ServeMux
	// stopped is closed when Run returns: the live streams end then, not
	// at the server's shutdown grace.
	stopped chan struct{}
}

// New returns the console. It starts nothing: Run keeps the history.
func New(c Config) *Console {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.PublicPath == "" {
		c.PublicPath = Path
	}
	k := &Console{
		c:        c,
		errs:     apierror.Writer{Log: c.Logger},
		sessions: newSessions(c.AdminKey, c.SessionTTL, c.Now),
		streams:  newStreams(StreamsPerSession, StreamsTotal),
		history:  newHistory(),
		mux:      http.NewServeMux(),
		stopped:  make(chan struct{}),
	}
	k.routes()
	return k
}

// Mount returns a handler that serves the console under Path and passes
// every other request to next.
func (k *Console) Mount(next http.Handler) http.Handler {
	root := strings.TrimSuffix(Path, "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == root:
			http.Redirect(w, r, k.c.PublicPath, http.StatusMovedPermanently)
		case strings.HasPrefix(p, Path):
			k.ServeHTTP(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// ServeHTTP serves the console's own routes (paths under Path).
func (k *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	k.mux.ServeHTTP(w, r)
}

// routes lists the console's routes. The pages are public (they hold no
// data); everything else needs a session, and every write its CSRF token.
func (k *Console) routes() {
	m := k.mux
	m.Handle("GET /console/{$}", k.asset("web/index.html", "text/html; charset=utf-8"))
	m.Handle("GET /console/console.js", k.asset("web/console.js", "text/javascript; charset=utf-8"))
	m.Handle("GET /console/console.css", k.asset("web/console.css", "text/css; charset=utf-8"))

	m.Handle("GET /console/session", k.signedIn(k.whoami()))
	m.Handle("POST /console/session", k.signIn())
	m.Handle("DELETE /console/session", k.signedIn(k.signOut()))
	m.Handle("GET /console/live", k.signedIn(k.live()))
	m.Handle("GET /console/rooms/{room}/history", k.signedIn(k.roomHistory()))
	m.Handle("GET /console/whatif", k.signedIn(k.whatIf()))
	k.forwardRoutes(m)
	m.Handle("/console/", k.fail(apierror.ErrNotFound))
}

func (k *Console) fail(err error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { k.errs.Write(w, r, err) })
}

func (k *Console) asset(name, contentType string) http.Handler {
	b, err := web.ReadFile(name)
	if err != nil {
		panic("console: missing embedded " + name) // a build error, caught by every test
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Write(b)
	})
}

type sessionKey struct{}

// signedIn passes requests with a valid session; for methods other than
// GET and HEAD also the CSRF checks.
func (k *Console) signedIn(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(CookieName)
		if err != nil {
			k.errs.Write(w, r, ErrSignedOut)
			return
		}
		se, ok := k.sessions.parse(c.Value)
		if !ok {
			k.errs.Write(w, r, ErrSignedOut)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !sameOrigin(r) || !rightKey(r.Header.Get(CSRFHeader), k.sessions.csrf(se)) {
				k.errs.Write(w, r, ErrCSRF)
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(contextWith(r.Context(), se)))
	})
}
