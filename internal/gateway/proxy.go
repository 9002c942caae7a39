// Package gateway is usher's gate at the edge of a site: Proxy, a reverse
// proxy in front of any origin, and Auth, the same decision for a front
// proxy that asks (forward auth). Both let through only visitors with a
// valid pass for the room their path maps to (Rules), and answer everyone
// else with the queue: a waiting page for browsers, the queue state as JSON
// for clients that ask for JSON.
//
// Contract: requests under Prefix (/_usher/) are usher's own, never the
// origin's. Waiting answers are 429 with Retry-After, never 2xx, so no cache
// or client mistakes them for the origin's; a newcomer to a room with
// pow_bits first solves a proof of work (428, package flood). An origin
// answer with `Usher-Release: 1` ends the visitor's slot.
//
// Limits: the Authorization header and the usher_* cookies reach the origin
// unchanged. See docs/proxy.md and docs/edge.md.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/apierror"
	"usher/internal/clientip"
	"usher/internal/fault"
	"usher/internal/flood"
	"usher/internal/gate"
	"usher/internal/identity"
	"usher/internal/queue"
	"usher/internal/token"
	"usher/internal/wire"
)

// Config is what the proxy needs. Origin, Queue, Keys and Registry are
// required.
type Config struct {
	Origin *url.URL
	Queue  *queue.Queue
	Keys   *token.Keyring
	Rules  Rules
	// API serves usher's own routes; it is mounted under Prefix with the
	// prefix stripped. Nil answers 404 there.
	API      http.Handler
	Registry prometheus.Registerer
	Logger   *slog.Logger
	// OriginTimeout bounds connecting to the origin and waiting for its
	// response headers (default 30s). Bodies may stream for longer.
	OriginTimeout time.Duration
	// Transport overrides the transport to the origin (tests); OriginTimeout
	// is then the transport's business.
	Transport http.RoundTripper
	// InsecureCookies drops the Secure attribute (plain HTTP on localhost).
	InsecureCookies bool
	// FailOpen lets signed passes through when the store is down.
	FailOpen bool
	// BodyTimeout bounds reading a request's body (default 60s), so that a
	// client that sends it slowly cannot hold a connection for ever;
	// upgraded connections (websockets) are exempt.
	BodyTimeout time.Duration
	// Identity verifies identity assertions in IdentityParam; nil refuses
	// them.
	Identity *identity.Verifier
	// Flood guards new places: the room's client_enters_per_minute and
	// pow_bits; nil lets every one in.
	Flood *flood.Guard
	// Lang picks the waiting page's language (lang.go): "auto" (default:
	// from each visitor's Accept-Language, English fallback), "auto:ko"
	// (another fallback), or "en" / "ko" for every visitor.
	Lang string
	// WaitingTemplate is the path of an operator's html/template for the
	// waiting page (fields: Page); "" uses the shipped one.
	WaitingTemplate string
	// PageDir is the operator's page directory (pagedir.go): brand.json,
	// waiting.html, text/<lang>.json, rooms/<room>/; "" for none.
	// Pages().Run reloads it.
	PageDir string
	// PublicHosts are the hosts (name, or name:port) the edge serves; a
	// request for another Host is refused (421). Only then does the origin
	// get the client's Host, in X-Forwarded-Host; empty accepts every Host
	// and sends none.
	PublicHosts []string
	// Trusted are the proxies in front of usher whose X-Forwarded-For names
	// the client: the address the origin is told in X-Forwarded-For and
	// X-Real-IP.
	Trusted clientip.Trusted
}

// core is what both edges share: the decision (decision.go) and its
// rendering (waiting.go).
type core struct {
	c       Config
	gate    *gate.Gate
	api     http.Handler
	errs    apierror.Writer
	metrics *metrics
	secure  bool
	log     *slog.Logger
	pages   *Pages
	lang    langPolicy
}

// Proxy is the gating reverse proxy; it is an http.Handler. Open paths are
// proxied without a pass, gated paths when gate.Gate.Admit passes them, with
// a renewed pass in Usher-Pass; without a pass a request enters the queue
// or reads its place. Origin failures answer 502, origin timeouts 504.
type Proxy struct {
	*core
	rp *httputil.ReverseProxy
}

// New returns the proxy. It starts nothing.
func New(c Config) (*Proxy, error) {
	if c.Origin == nil || c.Origin.Scheme == "" || c.Origin.Host == "" {
		return nil, fmt.Errorf("proxy: origin %v: want an absolute URL such as http://127.0.0.1:9000", c.Origin)
	}
	k, err := newCore(&c)
	if err != nil {
		return nil, err
	}
	if c.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = (&net.Dialer{Timeout: c.OriginTimeout, KeepAlive: 30 * time.Second}).DialContext
		t.ResponseHeaderTimeout = c.OriginTimeout
		t.MaxIdleConnsPerHost = 256
		c.Transport = t
	}
	p := &Proxy{core: k}
	p.rp = &httputil.ReverseProxy{
		Rewrite:   p.rewrite,
		Transport: c.Transport,
		// Flush every 100ms; server-sent events and bodies of unknown length
		// are flushed at once (ReverseProxy does that by itself).
		FlushInterval:  100 * time.Millisecond,
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.originError,
		ErrorLog:       slog.NewLogLogger(c.Logger.Handler(), slog.LevelWarn),
	}
	return p, nil
}

// newCore checks c, fills its defaults and makes what both edges share.
func newCore(c *Config) (*core, error) {
	if c.Queue == nil || c.Keys == nil {
		return nil, errors.New("gateway: a queue and keys are required")
	}
	for i, h := range c.PublicHosts {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" || strings.ContainsAny(h, "/@ \t") {
			return nil, fmt.Errorf("public host %q: want a host name, or name:port", c.PublicHosts[i])
		}
		c.PublicHosts[i] = h
	}
	if err := c.Rules.Validate(); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	lang, err := parseLang(c.Lang)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	pages, err := LoadPages(c.PageDir, c.WaitingTemplate, c.Registry, c.Logger)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if c.OriginTimeout <= 0 {
		c.OriginTimeout = 30 * time.Second
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = time.Minute
	}
	p := &core{
		c:       *c,
		errs:    apierror.Writer{Log: c.Logger},
		metrics: newMetrics(c.Registry, c.Rules.Bypass),
		secure:  !c.InsecureCookies,
		log:     c.Logger,
		pages:   pages,
		lang:    lang,
	}
	p.gate = gate.New(c.Queue, c.Keys, gate.Options{
		FailOpen: c.FailOpen, SecureCookie: p.secure, Errors: p.errs, Logger: c.Logger,
	})
	p.api = http.NotFoundHandler()
	if c.API != nil {
		p.api = http.StripPrefix(strings.TrimSuffix(Prefix, "/"), c.API)
	}
	return p, nil
}

// ServeHTTP routes the request: usher's own routes, the origin, or the
// queue.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil && r.Body != http.NoBody {
		// Whatever its headers: the server sets the next request's own
		// deadline when it reads it.
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(p.c.BodyTimeout))
	}
	w = &noStore{ResponseWriter: w}
	websocket := screenUpgrade(r)
	v := p.judge(r)
	if v.kind == own {
		p.serveOwn(w, r, v.path)
		return
	}
	if v.path != "" {
		r.URL.Path, r.URL.RawPath = v.path, ""
	}
	if v.kind == needsPlace {
		v = p.wait(w, r, v)
	}
	switch {
	case v.kind == through:
		f := &flight{room: v.room, websocket: websocket}
		if v.gated {
			f.visitor, f.extra, f.until = v.pass.Visitor, p.gate.Renewal(v.pass), v.pass.ExpiresAt
		}
		p.forward(w, r, f)
	case v.kind == admitted && wantsJSON(r): // the request that finds the visitor admitted goes through
		ttl := max(0, int64(v.cookie.Expires.Sub(p.c.Queue.Now())/time.Second))
		extra := http.Header{wire.PassHeader: {v.newPass}, "Set-Cookie": {v.cookie.String()},
			wire.PassTTLHeader: {strconv.FormatInt(ttl, 10)}}
		p.forward(w, r, &flight{room: v.room, visitor: v.visitor, extra: extra, websocket: websocket, until: v.cookie.Expires})
	default:
		p.render(w, r, v)
	}
}

// serveOwn serves a path under Prefix: the worker, or usher's API.
func (p *core) serveOwn(w http.ResponseWriter, r *http.Request, path string) {
	switch path {
	case WorkerPath:
		p.serveWorker(w, r)
		return
	case LangPath:
		p.serveLang(w, r)
		return
	}
	p.api.ServeHTTP(w, r)
}

// screenUpgrade keeps r's upgrade only when it is a websocket handshake (a
// GET without a body naming the websocket protocol) and strips any other
// (h2c, or any token an origin might switch to and then read further
// requests over, past the gate); it reports whether r is a websocket.
func screenUpgrade(r *http.Request) bool {
	up := r.Header.Values("Upgrade")
	if len(up) == 0 {
		r.Header.Del("Http2-Settings")
		return false
	}
	if len(up) == 1 && strings.EqualFold(strings.TrimSpace(up[0]), "websocket") &&
		r.Method == http.MethodGet && (r.Body == nil || r.Body == http.NoBody) {
		return true
	}
	r.Header.Del("Upgrade")
	r.Header.Del("Http2-Settings")
	return false
}

// rewrite makes the origin's request as wire.Headers says: the origin's
// URL without credential parameters, no header the table drops (usher's
// own, those that name the client or the public URL, those some origins
// route by, and every name with an underscore, which CGI-style origins read
// as a dash), then what the proxy knows (the resolved client, the scheme,
// and the public host when PublicHosts bounds it).
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(p.c.Origin)
	pr.Out.URL.RawQuery, _ = wire.StripCredentials(pr.Out.URL.RawQuery)
	h := pr.Out.Header
	for name := range h {
		if !toOrigin(name) {
			delete(h, name)
		}
	}
	if client := p.c.Trusted.Addr(pr.In); client.IsValid() {
		h.Set("X-Forwarded-For", client.String())
		h.Set("X-Real-IP", client.String())
	}
	proto := "http"
	if pr.In.TLS != nil {
		proto = "https"
	}
	h.Set("X-Forwarded-Proto", proto)
	if len(p.c.PublicHosts) > 0 { // judge refused every other Host
		h.Set("X-Forwarded-Host", pr.In.Host)
	}
}

// toOrigin reports whether a client's request header of that name may
// reach the origin as sent: only when no row of wire.Headers drops or
// replaces it.
func toOrigin(name string) bool {
	if pass, ok := originHops[http.CanonicalHeaderKey(name)]; ok {
		return pass
	}
	for _, row := range wire.Headers {
		if row.From == "client" && row.Pattern() && row.Matches(name) {
			return row.Origin == wire.Passed
		}
	}
	return true
}

// originHops are wire.Headers' named client rows by canonical name: whether
// each reaches the origin as sent.
var originHops = func() map[string]bool {
	m := map[string]bool{}
	for _, row := range wire.Headers {
		name := http.CanonicalHeaderKey(row.Name)
		if _, seen := m[name]; row.From == "client" && !row.Pattern() && !seen {
			m[name] = row.Origin == wire.Passed
		}
	}
	return m
}()

// ErrBadPath answers a request path that the proxy will not interpret: see
// package canon for what is refused.
var ErrBadPath = fault.New(fault.BadPath, "request path refused")

// flight is what the proxy knows about one request to the origin.
type flight struct {
	room, visitor string
	// extra are response headers for the visitor (a renewed pass).
	extra http.Header
	// websocket: the request may switch to the websocket protocol; on a
	// gated path the tunnel closes at until, the slot's expiry.
	websocket bool
	until     time.Time
	start     time.Time
}

type flightKey struct{}

// forward sends the request to the origin.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, f *flight) {
	inflight := p.metrics.inflight.WithLabelValues(f.room)
	inflight.Inc()
	defer inflight.Dec()
	f.start = time.Now()
	ctx := context.WithValue(r.Context(), flightKey{}, f)
	if f.websocket && !f.until.IsZero() {
		// A tunnel outlives no pass: ReverseProxy closes it when the
		// request's context ends.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, f.until)
		defer cancel()
	}
	p.rp.ServeHTTP(w, r.WithContext(ctx))
}

func flightOf(r *http.Request) *flight {
	if f, ok := r.Context().Value(flightKey{}).(*flight); ok {
		return f
	}
	return &flight{start: time.Now()}
}

// modifyResponse observes the origin's answer, honours Usher-Release and
// adds the visitor's renewed pass. A gated answer is marked for this visitor
// only (Cache-Control: private unless the origin chose, Vary: Cookie and
// Authorization), so that no shared cache serves it to someone without a
// pass; an answer that carries usher's cookies or a pass is stored by no
// cache at all (noStore).
func (p *Proxy) modifyResponse(res *http.Response) error {
	f := flightOf(res.Request)
	if res.StatusCode == http.StatusSwitchingProtocols &&
		(!f.websocket || !strings.EqualFold(res.Header.Get("Upgrade"), "websocket")) {
		return errSwitched // a switch nobody asked for: no tunnel (502)
	}
	p.metrics.observe(f.room, res.StatusCode, time.Since(f.start))
	if f.visitor != "" { // a gated request: what the room's admission loads the origin with
		p.c.Queue.Observe(f.room, time.Since(f.start), res.StatusCode >= 500)
	}
	if f.visitor != "" { // a gated answer, for this visitor only
		if res.Header.Get("Cache-Control") == "" {
			res.Header.Set("Cache-Control", "private")
		}
		res.Header.Add("Vary", "Cookie")
		res.Header.Add("Vary", "Authorization")
	}
	release := res.Header.Get(wire.ReleaseHeader)
	res.Header.Del(wire.ReleaseHeader)
	if wire.Releases(release) {
		p.release(res, f)
	} else {
		for k, vs := range f.extra {
			for _, v := range vs {
				res.Header.Add(k, v)
			}
		}
	}
	return nil
}

var errSwitched = errors.New("origin switched protocols without a websocket request")

// release ends the slot of the visitor the request was admitted as (or, on
// an open path, of the pass it carries) and clears the pass cookie.
func (p *Proxy) release(res *http.Response, f *flight) {
	visitor := f.visitor
	if visitor == "" {
		if raw, _ := gate.PassFrom(res.Request); raw != "" {
			if pass, err := p.c.Keys.ParsePass(raw, f.room); err == nil {
				visitor = pass.Visitor
			}
		}
	}
	if visitor == "" {
		return
	}
	if err := p.c.Queue.Leave(res.Request.Context(), f.room, visitor); err != nil {
		p.log.Warn("release", "room", f.room, "err", err)
		return
	}
	c := &http.Cookie{Name: wire.PassCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: p.secure, SameSite: http.SameSiteLaxMode}
	res.Header.Add("Set-Cookie", c.String())
}

// originError answers a failed round trip: 504 for a timeout, else 502.
func (p *Proxy) originError(w http.ResponseWriter, r *http.Request, err error) {
	f := flightOf(r)
	status := http.StatusBadGateway
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		status = http.StatusGatewayTimeout
	}
	p.metrics.observe(f.room, status, time.Since(f.start))
	if f.visitor != "" && r.Context().Err() == nil {
		p.c.Queue.Observe(f.room, time.Since(f.start), true)
	}
	if r.Context().Err() != nil { // the visitor went away; nobody reads this
		p.log.Debug("origin request canceled", "room", f.room, "err", err)
	} else {
		p.log.Warn("origin request failed", "room", f.room, "status", status, "err", err)
	}
	for k, vs := range f.extra {
		w.Header()[k] = vs
	}
	msg := "The site behind this waiting room did not answer correctly. Please try again in a moment."
	if status == http.StatusGatewayTimeout {
		msg = "The site behind this waiting room took too long to answer. Please try again in a moment."
	}
	p.plainPage(w, status, msg)
}

// plainPage writes a minimal HTML page.
func (p *core) plainPage(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := plainTmpl.Execute(w, struct {
		Status  int
		Title   string
		Message string
	}{status, http.StatusText(status), msg}); err != nil {
		p.log.Debug("plain page", "err", err)
	}
}
