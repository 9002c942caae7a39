package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"usher/internal/admission"
	"usher/internal/clientip"
	"usher/internal/console"
	"usher/internal/event/kafkaevent"
	"usher/internal/event/natsevent"
	"usher/internal/flood"
	"usher/internal/hold"
	"usher/internal/httpapi"
	"usher/internal/identity"
	"usher/internal/limit"
	"usher/internal/pow"
	"usher/internal/queue"
	"usher/internal/token"
)

// coreFlags are the settings serve and proxy share.
type coreFlags struct {
	addr, adminAddr, store, dataDir, keysDir, adminKey *string
	redisPrefix                                        *string
	// queueStore, holdStore and limitStore default to store (check).
	queueStore, holdStore, limitStore *string
	failOpen, insecure, console       *bool
	logs                              logFlags
	storeTimeout                      *time.Duration
	trustedProxies, metricsAddr       *string
	identitySecret, identityKey       *string
	// command is the subcommand (serve, proxy, auth), which names its lock
	// of the data directory.
	command string
	// adminEnv is --admin-addr's variable: USHER_ADMIN_ADDR for serve, the
	// command's own for proxy and auth (their defaults differ, as
	// USHER_ORIGIN_ADDR's does from USHER_ADDR's).
	adminEnv string
	// roomsFile is the memory store's rooms file in the data directory.
	roomsFile string
	// parsed holds what check read from the settings, for openCore.
	parsed *parsedCore
}

// parsedCore is what coreFlags.check parsed: read once.
type parsedCore struct {
	trusted     clientip.Trusted
	identityPub ed25519.PublicKey // nil without --identity-public-key
	// storeFlag names, for each of queue-store, hold-store and
	// limit-store, the flag its value came from (itself or store).
	storeFlag map[string]string
}

// addCoreFlags adds the shared flags; dataDirUse says what the command
// keeps in the data directory, roomsFile names the memory store's file of
// rooms there (one per command, so that serve and proxy may share a
// directory), adminAddr is the command's default --admin-addr (one per
// command, so that serve, proxy and auth may share a host).
func addCoreFlags(f *flags, dataDirUse, roomsFile, adminAddr string) coreFlags {
	adminEnv := sharedPrefix + "ADMIN_ADDR"
	if f.Name() != "serve" {
		adminEnv = sharedPrefix + strings.ToUpper(f.Name()) + "_ADMIN_ADDR"
	}
	f.env["admin-addr"] = adminEnv
	return coreFlags{
		command:   f.Name(),
		adminEnv:  adminEnv,
		roomsFile: roomsFile,
		parsed:    &parsedCore{storeFlag: map[string]string{}},
		addr:      f.string("addr", ":8080", "the visitors' listen address"),
		adminAddr: f.string("admin-addr", adminAddr,
			"the operators' listen address: the admin API, the console at /console/ and /metrics, each with the admin key (loopback by default); empty: none"),
		store:       f.string("store", "memory", "the fast store (queue, holds, per-client limits): memory (one instance; rooms and their settings kept in <data-dir>/"+roomsFile+", queues lost on restart) or redis://host:port/db"),
		queueStore:  f.string("queue-store", "", "the queue store, if not --store's: memory or redis://…"),
		holdStore:   f.string("hold-store", "", "the hold store, if not --store's: memory or redis://…"),
		limitStore:  f.string("limit-store", "", "the store of per-client limits, if not --store's: memory or redis://…"),
		dataDir:     f.string("data-dir", "./data", "directory for what the embedded defaults keep ("+dataDirUse+")"),
		keysDir:     f.string("keys-dir", "", "signing keys directory, shared by all instances (default <data-dir>/keys)"),
		adminKey:    f.string("admin-key", "", "admin API key (default: generated into <data-dir>/admin.key)"),
		redisPrefix: f.string("redis-prefix", "usher:", "prefix of every Redis key"),
		failOpen:    f.bool("fail-open", false, "let visitors with a signed pass through when the store is down"),
		insecure:    f.bool("insecure-cookies", false, "drop the Secure cookie attribute (plain HTTP on a non-localhost host)"),
		console:     f.bool("console", true, "serve the operator's console at /console/ on --admin-addr, signed in with the admin key"),
		logs:        addLogFlags(f),
		storeTimeout: f.duration("store-timeout", queue.DefaultStoreTimeout,
			"deadline of each queue and hold store call on request paths; a call that misses it is a store outage (503, or --fail-open); 0: none"),
		metricsAddr: f.string("metrics-addr", "",
			"one more listen address that serves /metrics without the admin key (for Prometheus on an internal network); --admin-addr serves it to the admin key"),
		identitySecret: f.string("identity-secret", "",
			"shared secret (at least 32 bytes) with which the site signs identity assertions (HS256 JWTs); empty: none"),
		identityKey: f.string("identity-public-key", "",
			"PEM file of the Ed25519 public key with which identity assertions (EdDSA JWTs) are checked; empty: none"),
		trustedProxies: f.string("trusted-proxies", "",
			"comma-separated CIDRs of proxies in front of usher whose X-Forwarded-For names the client (per-client limits); empty: the peer address is the client"),
	}
}

// check reports bad core settings into f's errors, before anything is
// opened or written.
func (c coreFlags) check(f *flags) {
	c.logs.check(f)
	for _, s := range []struct {
		name string
		spec *string
	}{{"store", c.store}, {"queue-store", c.queueStore}, {"hold-store", c.holdStore}, {"limit-store", c.limitStore}} {
		c.parsed.storeFlag[s.name] = s.name
		if *s.spec == "" { // checked as --store
			*s.spec, c.parsed.storeFlag[s.name] = *c.store, "store"
			continue
		}
		if err := checkStore(s.name, *s.spec); err != nil {
			f.errs = append(f.errs, err.Error())
		}
	}
	if a := *c.adminAddr; a != "" && !strings.HasSuffix(a, ":0") && (a == *c.addr || a == *c.metricsAddr) {
		f.errs = append(f.errs, fmt.Sprintf("--admin-addr/%s=%q: the operators' listener needs an address of its own, not --addr's or --metrics-addr's", c.adminEnv, a))
	}
	if k := *c.adminKey; k != "" && len(k) < minAdminKey {
		f.errs = append(f.errs, fmt.Sprintf("--admin-key/%sADMIN_KEY: %d characters, want at least %d (the generated key has 32)", sharedPrefix, len(k), minAdminKey))
	}
	if n := len(*c.identitySecret); n > 0 && n < 32 {
		f.errs = append(f.errs, fmt.Sprintf("--identity-secret/%sIDENTITY_SECRET: %d bytes, want at least 32", sharedPrefix, n))
	}
	if p := *c.identityKey; p != "" {
		var err error
		if c.parsed.identityPub, err = identity.LoadPublicKey(p); err != nil {
			f.errs = append(f.errs, fmt.Sprintf("--identity-public-key/%sIDENTITY_PUBLIC_KEY: %v", sharedPrefix, err))
		}
	}
	var err error
	if c.parsed.trusted, err = clientip.ParseTrusted(*c.trustedProxies); err != nil {
		f.errs = append(f.errs, fmt.Sprintf("--trusted-proxies/%sTRUSTED_PROXIES: %v", sharedPrefix, err))
	}
}

// minAdminKey is the shortest admin key accepted: 24 characters of
// base64url carry 144 bits; the generated key has 32 (192 bits).
const minAdminKey = 24

// checkDirs checks, writing nothing, that the directories the command
// writes can be written: --data-dir when the core writes there (the memory
// store's rooms, the first signing key, the generated admin key) or when
// alsoDataDir says the command does (its SQLite files, its embedded NATS);
// --keys-dir when it holds no key yet.
func (c coreFlags) checkDirs(alsoDataDir bool) error {
	if alsoDataDir || *c.queueStore == "memory" ||
		(*c.keysDir == "" && noKeys(keysDir("", *c.dataDir))) ||
		(*c.adminKey == "" && missing(filepath.Join(*c.dataDir, "admin.key"))) {
		if err := checkWritable(sharedSetting("data-dir", *c.dataDir), *c.dataDir); err != nil {
			return err
		}
	}
	if *c.keysDir != "" && noKeys(*c.keysDir) {
		return checkWritable(sharedSetting("keys-dir", *c.keysDir), *c.keysDir)
	}
	return nil
}

// noKeys reports whether dir holds no signing key, so that token.LoadDir
// will write one.
func noKeys(dir string) bool {
	names, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	return len(names) == 0
}

// missing reports whether path cannot be read as a file, so that
// loadOrCreateAdminKey will write one.
func missing(path string) bool {
	_, err := os.Stat(path)
	return err != nil
}

// listeners are a command's listeners: the visitors' (--addr), the
// operators' (--admin-addr) and the keyless /metrics (--metrics-addr); the
// last two are nil when their flag is empty.
type listeners struct {
	public, admin, metrics net.Listener
}

// listen binds --addr, --admin-addr and --metrics-addr; cl closes them if
// the command stops before it serves.
func (c coreFlags) listen(cl *closers) (listeners, error) {
	var l listeners
	for _, b := range []struct {
		name string
		addr string
		ln   *net.Listener
	}{{"addr", *c.addr, &l.public}, {"admin-addr", *c.adminAddr, &l.admin}, {"metrics-addr", *c.metricsAddr, &l.metrics}} {
		if b.addr == "" && b.name != "addr" {
			continue
		}
		setting := sharedSetting(b.name, b.addr)
		if b.name == "admin-addr" {
			setting = fmt.Sprintf("--admin-addr/%s=%q", c.adminEnv, b.addr)
		}
		ln, err := listenTCP(setting, b.addr)
		if err != nil {
			return l, err
		}
		cl.add(func() { ln.Close() })
		*b.ln = ln
	}
	return l, nil
}

// opened is what openCore builds on: the fast store, the signing keys and
// the admin key.
type opened struct {
	qs       queue.Store
	hs       hold.Store
	ls       limit.Store
	keys     *token.Keyring
	adminKey string
}

// open opens the fast store, then the command's own parts (more), then the
// keys, in the order of openInOrder: what lives outside the process before
// what the data directory holds. When the command keeps state there (the
// memory store's rooms, a local step of more), it first locks the data
// directory against a second instance (lockDataDir).
func (c coreFlags) open(ctx context.Context, log *slog.Logger, cl *closers, more ...step) (opened, error) {
	o := opened{adminKey: *c.adminKey}
	state := *c.queueStore == "memory"
	for _, s := range more {
		state = state || s.local
	}
	lock := step{local: true, open: func() error {
		if !state {
			return nil
		}
		f, err := lockDataDir(*c.dataDir, c.command)
		if f != nil {
			cl.add(func() { f.Close() })
		}
		return err
	}}
	fast := fastStores{prefix: *c.redisPrefix, cl: cl}
	queueStore := step{local: *c.queueStore == "memory", open: func() (err error) {
		o.qs, err = fast.queue(ctx, c.parsed.storeFlag["queue-store"], *c.queueStore, filepath.Join(*c.dataDir, c.roomsFile))
		return err
	}}
	holdStore := step{open: func() (err error) {
		o.hs, err = fast.hold(ctx, c.parsed.storeFlag["hold-store"], *c.holdStore)
		return err
	}}
	limitStore := step{open: func() (err error) {
		o.ls, err = fast.limit(ctx, c.parsed.storeFlag["limit-store"], *c.limitStore)
		return err
	}}
	keys := step{local: true, open: func() (err error) {
		if o.adminKey == "" {
			if o.adminKey, err = loadOrCreateAdminKey(*c.dataDir, log); err != nil {
				return err
			}
		}
		dir := keysDir(*c.keysDir, *c.dataDir)
		if o.keys, err = token.LoadDir(dir, time.Now); err != nil {
			name, value := "keys-dir", dir
			if *c.keysDir == "" {
				name, value = "data-dir", *c.dataDir
			}
			return fmt.Errorf("%s: signing keys: %w", sharedSetting(name, value), err)
		}
		return nil
	}}
	steps := append(append([]step{lock, queueStore, holdStore, limitStore}, more...), keys)
	return o, openInOrder(steps...)
}

// core is the waiting room that serve and proxy both run: the fast store,
// the signing keys, the admin key, the metrics registry, the queue and its
// admission scheduler.
type core struct {
	log      *slog.Logger
	holds    hold.Store
	keys     *token.Keyring
	adminKey string
	reg      *prometheus.Registry
	// queueMetrics are the queue's metrics, registered in reg.
	queueMetrics *queue.Metrics
	q            *queue.Queue
	sched        *admission.Scheduler
	flood        *flood.Guard
	identity     *identity.Verifier
	// lns are the command's listeners.
	lns listeners
	// admin is what the operators' listener serves, once api built it:
	// every route of the API, and the console.
	admin http.Handler
	// console is the operator's console, once api mounted it (--console).
	console *console.Console
	// events publishes the queue's, holds' and settings' events (nil:
	// none); events.go.
	events       publisher
	natsMetrics  *natsevent.Metrics
	kafkaMetrics *kafkaevent.Metrics
	eventsConf   eventsConfig
}

// openCore builds the core on what open opened, logging to log, serving
// the operators' listener and the keyless /metrics of lns and publishing
// events as ec says.
func openCore(c coreFlags, o opened, lns listeners, log *slog.Logger, ec eventsConfig) (*core, error) {
	k := &core{log: log, keys: o.keys, adminKey: o.adminKey, lns: lns}
	k.holds = hold.WithTimeout(o.hs, *c.storeTimeout)
	k.reg = prometheus.NewRegistry()
	k.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := k.openEvents(ec); err != nil {
		return nil, err
	}
	k.queueMetrics = queue.NewMetrics(k.reg)
	k.q = queue.New(o.qs, queue.Options{Metrics: k.queueMetrics, Logger: k.log.With("component", "queue"), StoreTimeout: *c.storeTimeout,
		Events: k.emitter()})
	k.sched = admission.New(k.q, k.log.With("component", "admission"))
	k.flood = flood.New(o.ls, pow.New(k.keys, o.ls, time.Now), c.parsed.trusted, time.Now)
	var err error
	if k.identity, err = identity.New([]byte(*c.identitySecret), c.parsed.identityPub, time.Now); err != nil {
		return nil, err
	}
	return k, nil
}

// api builds the JSON API on the core (sale may be nil) and returns the
// visitors' part, for --addr. The operators' listener serves every route,
// and with --console the operator's console at console.Path (k.admin).
func (k *core) api(c coreFlags, cfg httpapi.Config) http.Handler {
	cfg.Queue, cfg.Keys, cfg.AdminKey, cfg.Registry = k.q, k.keys, k.adminKey, k.reg
	cfg.Logger, cfg.InsecureCookies, cfg.FailOpen = k.log.With("component", "http"), *c.insecure, *c.failOpen
	cfg.Flood, cfg.Identity, cfg.Events = k.flood, k.identity, k.emitter()
	api := httpapi.New(cfg)
	k.admin = api.Operators
	if *c.console {
		// The console reads the ETA error every second: from a registry of
		// its own, not by gathering every room's metrics.
		eta := prometheus.NewRegistry()
		eta.MustRegister(k.queueMetrics.ETAErrors())
		k.console = console.New(console.Config{
			Queue: k.q, API: api.Operators, AdminKey: k.adminKey,
			InsecureCookies: *c.insecure, Trusted: c.parsed.trusted, Gatherer: eta, Booking: cfg.Sale != nil,
			Logger: k.log.With("component", "console"),
		})
		k.admin = k.console.Mount(api.Operators)
	}
	k.admin = c.logs.accessLog(k.log.With("component", "access", "listener", "admin"), k.admin)
	return api.Visitors
}

// run serves srv on ln and runs the room views' refresher, the admission
// scheduler and parts until ctx ends; then it shuts the server down,
// allowing requests 10 s to finish before it closes what is left open.
func (k *core) run(ctx context.Context, srv *http.Server, ln net.Listener, parts ...func(context.Context) error) error {
	srv.ErrorLog = slog.NewLogLogger(k.log.Handler(), slog.LevelWarn)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return k.q.Run(gctx) })
	g.Go(func() error { return k.sched.Run(gctx) })
	if k.console != nil {
		g.Go(func() error { return k.console.Run(gctx) })
	}
	if k.events != nil {
		// The publisher outlives the rest: it takes the events of the
		// requests the shutdown lets finish, and the queue's last counts.
		pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan error, 1)
		go func() { done <- k.events.Run(pctx) }()
		defer func() {
			drain, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			k.q.DrainCounts(drain)
			cancel()
			stop()
			<-done
		}()
		g.Go(func() error { return k.q.RunCounts(gctx) })
	}
	for _, part := range parts {
		g.Go(func() error { return part(gctx) })
	}
	if k.lns.admin != nil {
		admin := &http.Server{Handler: k.admin, ReadTimeout: 15 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
			ErrorLog: srv.ErrorLog}
		g.Go(func() error { return serveAdmin(gctx, admin, k.lns.admin) })
	}
	if k.lns.metrics != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(k.reg, promhttp.HandlerOpts{}))
		metrics := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second, ErrorLog: srv.ErrorLog}
		g.Go(func() error { return serveAdmin(gctx, metrics, k.lns.metrics) })
	}
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			return srv.Close() // streams still open after the grace period
		}
		return nil
	})
	return g.Wait()
}

// serveAdmin serves srv on ln until ctx ends, then shuts it down as run
// does the visitors' server.
func serveAdmin(ctx context.Context, srv *http.Server, ln net.Listener) error {
	done := make(chan error, 1)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			done <- srv.Close()
			return
		}
		done <- nil
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return <-done
}

// detail is one thing the start line says about the command's setup.
type detail struct{ key, value string }

// announce says where the command (usher, usher proxy, usher auth) serves,
// and what each listener binds: in text, a line on stdout per listener; in
// JSON, a log record each, so that the stream holds nothing but JSON.
func (k *core) announce(c coreFlags, stdout io.Writer, command string, details ...detail) {
	type line struct {
		name, what, url string
		addr            net.Addr
		details         []detail
	}
	lines := []line{{"visitors", "serving", baseURL(k.lns.public.Addr()), k.lns.public.Addr(), details}}
	if ln := k.lns.admin; ln != nil {
		serves := "the admin API, /metrics"
		if k.console != nil {
			serves = "the admin API, /console/, /metrics"
		}
		lines = append(lines, line{"admin", "admin", baseURL(ln.Addr()), ln.Addr(), []detail{{"serves", serves}}})
	}
	if ln := k.lns.metrics; ln != nil {
		lines = append(lines, line{"metrics", "metrics", baseURL(ln.Addr()) + "/metrics", ln.Addr(), []detail{{"serves", "/metrics without the admin key"}}})
	}
	for _, l := range lines {
		bound, scope := bindScope(l.addr)
		if *c.logs.format == "json" {
			attrs := []any{"listener", l.name, "url", l.url, "listen", bound}
			if scope != "" {
				attrs = append(attrs, "interfaces", scope)
			}
			for _, d := range l.details {
				attrs = append(attrs, d.key, d.value)
			}
			k.log.Info("serving", attrs...)
			continue
		}
		listen := "listening on " + bound
		if scope != "" {
			listen += ", " + scope
		}
		var more []string
		for _, d := range l.details {
			if d.key == "serves" {
				more = append(more, d.value)
			} else {
				more = append(more, d.key+" "+d.value)
			}
		}
		if len(more) > 0 {
			listen += "; " + strings.Join(more, ", ")
		}
		fmt.Fprintf(stdout, "%s %s on %s (%s)\n", command, l.what, l.url, listen)
	}
}

// bindScope is the address ln binds and which interfaces that reaches:
// "every interface" ([::], which takes IPv4 too), "every IPv4 interface"
// (0.0.0.0), "loopback only", or "" for one address.
func bindScope(addr net.Addr) (bound, scope string) {
	bound = addr.String()
	host, _, err := net.SplitHostPort(bound)
	ip := net.ParseIP(host)
	switch {
	case err != nil || ip == nil:
	case ip.IsUnspecified() && ip.To4() != nil:
		scope = "every IPv4 interface"
	case ip.IsUnspecified():
		scope = "every interface"
	case ip.IsLoopback():
		scope = "loopback only"
	}
	return bound, scope
}
