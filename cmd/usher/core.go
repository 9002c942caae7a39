package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"usher/internal/admission"
	"usher/internal/clientip"
	"usher/internal/console"
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
	addr, store, dataDir, keysDir, adminKey, redisPrefix *string
	failOpen, insecure, console                          *bool
	logs                                                 logFlags
	storeTimeout                                         *time.Duration
	trustedProxies, metricsAddr                          *string
	identitySecret, identityKey                          *string
	// roomsFile is the memory store's rooms file in the data directory.
	roomsFile string
	// parsed holds what check read from the settings, for openCore.
	parsed *parsedCore
}

// parsedCore is what coreFlags.check parsed: read once.
type parsedCore struct {
	trusted     clientip.Trusted
	identityPub ed25519.PublicKey // nil without --identity-public-key
}

// addCoreFlags adds the shared flags; dataDirUse says what the command
// keeps in the data directory, roomsFile names the memory store's file of
// rooms there (one per command, so that serve and proxy may share a
// directory).
func addCoreFlags(f *flags, dataDirUse, roomsFile string) coreFlags {
	return coreFlags{
		roomsFile:   roomsFile,
		parsed:      new(parsedCore),
		addr:        f.string("addr", ":8080", "listen address"),
		store:       f.string("store", "memory", "queue and hold store: memory (one instance; rooms and their settings kept in <data-dir>/"+roomsFile+", queues lost on restart) or redis://host:port/db"),
		dataDir:     f.string("data-dir", "./data", "directory for what the embedded defaults keep ("+dataDirUse+")"),
		keysDir:     f.string("keys-dir", "", "signing keys directory, shared by all instances (default <data-dir>/keys)"),
		adminKey:    f.string("admin-key", "", "admin API key (default: generated into <data-dir>/admin.key)"),
		redisPrefix: f.string("redis-prefix", "usher:", "prefix of every Redis key"),
		failOpen:    f.bool("fail-open", false, "let visitors with a signed pass through when the store is down"),
		insecure:    f.bool("insecure-cookies", false, "drop the Secure cookie attribute (plain HTTP on a non-localhost host)"),
		console:     f.bool("console", true, "serve the operator's console at /console/ (/_usher/console/ on proxy), signed in with the admin key"),
		logs:        addLogFlags(f),
		storeTimeout: f.duration("store-timeout", queue.DefaultStoreTimeout,
			"deadline of each queue and hold store call on request paths; a call that misses it is a store outage (503, or --fail-open); 0: none"),
		metricsAddr: f.string("metrics-addr", "",
			"a second listen address that serves /metrics without the admin key (for Prometheus on an internal network); the main address serves it to the admin key only"),
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
	if err := checkStore(*c.store); err != nil {
		f.errs = append(f.errs, err.Error())
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
	if alsoDataDir || *c.store == "memory" ||
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

// listen binds --addr, and --metrics-addr when it is set (else metrics is
// nil); cl closes them if the command stops before it serves.
func (c coreFlags) listen(cl *closers) (ln, metrics net.Listener, err error) {
	if ln, err = listenTCP(sharedSetting("addr", *c.addr), *c.addr); err != nil {
		return nil, nil, err
	}
	cl.add(func() { ln.Close() })
	if *c.metricsAddr != "" {
		if metrics, err = listenTCP(sharedSetting("metrics-addr", *c.metricsAddr), *c.metricsAddr); err != nil {
			return nil, nil, err
		}
		cl.add(func() { metrics.Close() })
	}
	return ln, metrics, nil
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
// what the data directory holds.
func (c coreFlags) open(ctx context.Context, log *slog.Logger, cl *closers, more ...step) (opened, error) {
	o := opened{adminKey: *c.adminKey}
	stores := step{local: *c.store == "memory", open: func() (err error) {
		o.qs, o.hs, o.ls, err = openStores(ctx, *c.store, *c.redisPrefix, filepath.Join(*c.dataDir, c.roomsFile), cl)
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
	steps := append(append([]step{stores}, more...), keys)
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
	// metrics is the listener of the public /metrics (--metrics-addr), or
	// nil.
	metrics net.Listener
	// console is the operator's console, once api mounted it (--console).
	console *console.Console
	// events publishes the queue's, holds' and settings' events (nil:
	// none); events.go.
	events       *natsevent.Publisher
	eventMetrics *natsevent.Metrics
	eventsConf   eventsConfig
}

// openCore builds the core on what open opened, logging to log, serving
// the public /metrics on metrics (nil: none) and publishing events as ec
// says.
func openCore(c coreFlags, o opened, metrics net.Listener, log *slog.Logger, ec eventsConfig) (*core, error) {
	k := &core{log: log, keys: o.keys, adminKey: o.adminKey, metrics: metrics}
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

// api is the JSON API on the core; sale may be nil. With --console the
// operator's console is mounted on it at console.Path, which browsers
// reach at publicPath.
func (k *core) api(c coreFlags, cfg httpapi.Config, publicPath string) http.Handler {
	cfg.Queue, cfg.Keys, cfg.AdminKey, cfg.Registry = k.q, k.keys, k.adminKey, k.reg
	cfg.Logger, cfg.InsecureCookies, cfg.FailOpen = k.log.With("component", "http"), *c.insecure, *c.failOpen
	cfg.Flood, cfg.Identity, cfg.Events = k.flood, k.identity, k.emitter()
	api := httpapi.NewServer(cfg)
	if !*c.console {
		return api
	}
	// The console reads the ETA error every second: from a registry of its
	// own, not by gathering every room's metrics.
	eta := prometheus.NewRegistry()
	eta.MustRegister(k.queueMetrics.ETAErrors())
	k.console = console.New(console.Config{
		Queue: k.q, API: api, AdminKey: k.adminKey, PublicPath: publicPath,
		InsecureCookies: *c.insecure, Trusted: c.parsed.trusted, Gatherer: eta, Booking: cfg.Sale != nil,
		Logger: k.log.With("component", "console"),
	})
	return k.console.Mount(api)
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
	if k.metrics != nil {
		g.Go(func() error { return k.serveMetrics(gctx) })
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

// serveMetrics serves /metrics without the admin key on --metrics-addr
// until ctx ends.
func (k *core) serveMetrics(ctx context.Context) error {
	ln := k.metrics
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(k.reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
	k.log.Info("metrics serving", "url", baseURL(ln.Addr())+"/metrics")
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
