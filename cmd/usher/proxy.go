package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"usher/internal/admission"
	"usher/internal/gateway"
	"usher/internal/httpapi"
	"usher/internal/queue"
	"usher/internal/token"
)

// proxy runs the gating reverse proxy in front of an origin, with the queue,
// the room views' refresher and the admission scheduler, until ctx ends.
func proxy(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newFlags("proxy", getenv, stderr)
	addr := f.string("addr", ":8080", "listen address")
	originFlag := f.string("origin", "", "origin URL to gate, such as http://127.0.0.1:9000 (required)")
	room := f.string("room", "sale", "room of paths no --route maps")
	originTimeout := f.duration("origin-timeout", 30*time.Second, "most time to connect to the origin and get its response headers (then 504)")
	store := f.string("store", "memory", "queue store: memory (one instance, lost on restart) or redis://host:port/db")
	dataDir := f.string("data-dir", "./data", "directory for what the embedded defaults keep (keys, admin key)")
	keysFlag := f.string("keys-dir", "", "signing keys directory, shared by all instances (default <data-dir>/keys)")
	adminKey := f.string("admin-key", "", "admin API key (default: generated into <data-dir>/admin.key)")
	redisPrefix := f.string("redis-prefix", "usher:", "prefix of every Redis key")
	failOpen := f.bool("fail-open", false, "let visitors with a signed pass through when the store is down")
	insecure := f.bool("insecure-cookies", false, "drop the Secure cookie attribute (plain HTTP on a non-localhost host)")
	gates := f.stringList("gate", "gated path pattern, repeatable (default /: everything); longest pattern wins")
	opens := f.stringList("open", "always-open path pattern, repeatable, such as /static/ or /healthz")
	lang := f.string("lang", "en", "waiting page language: en or ko")
	waitingTemplate := f.string("waiting-template", "", "operator's html/template for the waiting page (see docs/proxy.md)")
	routes := f.stringList("route", "path prefix → room, repeatable, such as /concert-a/=room-a; longest prefix wins")
	if err := f.parse(args); err != nil {
		return err
	}
	f.positive("origin-timeout", originTimeout.Seconds())
	if err := f.check(); err != nil {
		return err
	}
	origin, err := url.Parse(*originFlag)
	if err != nil || (origin.Scheme != "http" && origin.Scheme != "https") || origin.Host == "" {
		return fmt.Errorf("bad setting --origin/USHER_ORIGIN=%q: want http://host:port or https://…", *originFlag)
	}
	rules := gateway.Rules{DefaultRoom: *room, Gate: *gates, Open: *opens}
	for _, s := range *routes {
		r, err := gateway.ParseRoute(s)
		if err != nil {
			return fmt.Errorf("bad setting --route/USHER_ROUTE: %w", err)
		}
		rules.Routes = append(rules.Routes, r)
	}
	if err := rules.Validate(); err != nil {
		return fmt.Errorf("bad path rules: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	var cl closers
	defer cl.Close()
	qs, _, err := openStores(ctx, *store, *redisPrefix, &cl)
	if err != nil {
		return err
	}
	keys, err := token.LoadDir(keysDir(*keysFlag, *dataDir), time.Now)
	if err != nil {
		return fmt.Errorf("signing keys: %w", err)
	}
	if *adminKey == "" {
		if *adminKey, err = loadOrCreateAdminKey(*dataDir, log); err != nil {
			return err
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	q := queue.New(qs, queue.Options{Metrics: queue.NewMetrics(reg), Logger: log.With("component", "queue")})
	for _, r := range rules.Rooms() {
		if _, err := q.EnsureRoom(ctx, r); err != nil {
			return fmt.Errorf("room %s: %w", r, err)
		}
	}
	sched := admission.New(q, log.With("component", "admission"))
	p, err := gateway.New(gateway.Config{
		Origin: origin, Queue: q, Keys: keys, Rules: rules, Registry: reg,
		API: httpapi.NewServer(httpapi.Config{
			Queue: q, Keys: keys, AdminKey: *adminKey, Registry: reg,
			Logger: log.With("component", "http"), InsecureCookies: *insecure, FailOpen: *failOpen,
		}),
		Logger:        log.With("component", "proxy"),
		OriginTimeout: *originTimeout, InsecureCookies: *insecure, FailOpen: *failOpen,
		Lang: *lang, WaitingTemplate: *waitingTemplate,
	})
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler: p,
		// No ReadTimeout or WriteTimeout: uploads, server-sent events and
		// websockets stream through for as long as they last.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("bad setting --addr/USHER_ADDR=%q: %w", *addr, err)
	}
	fmt.Fprintf(stdout, "usher proxy serving on http://%s for %s (store %s, rooms %s)\n",
		ln.Addr(), redactURL(origin.String()), redactURL(*store), strings.Join(rules.Rooms(), ","))

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return q.Run(gctx) })
	g.Go(func() error { return sched.Run(gctx) })
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

// stringList is a repeatable flag whose default comes from its USHER_*
// variable, comma-separated; the first use of the flag replaces that default.
func (f *flags) stringList(name, usage string) *[]string {
	l := &listFlag{}
	for s := range strings.SplitSeq(f.getenv(envName(name)), ",") {
		if s = strings.TrimSpace(s); s != "" {
			l.vals = append(l.vals, s)
		}
	}
	f.Var(l, name, usage+" ($"+envName(name)+", comma-separated)")
	return &l.vals
}

type listFlag struct {
	vals []string
	set  bool
}

func (l *listFlag) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(l.vals, ",")
}

func (l *listFlag) Set(s string) error {
	if !l.set {
		l.vals, l.set = nil, true
	}
	l.vals = append(l.vals, s)
	return nil
}
