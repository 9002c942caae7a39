package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"usher/internal/console"
	"usher/internal/gateway"
	"usher/internal/httpapi"
	"usher/internal/queue"
)

// proxy runs the gating reverse proxy in front of an origin, with the queue,
// the room views' refresher and the admission scheduler, until ctx ends.
func proxy(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newFlags("proxy", getenv, stderr)
	c := addCoreFlags(f, "keys, admin key, rooms", "proxy-rooms.json")
	f.own("proxy")
	originFlag := f.string("origin", "", "origin URL to gate, such as http://127.0.0.1:9000 (required)")
	room := f.string("room", "sale", "room of paths no --route maps")
	originTimeout := f.duration("origin-timeout", 30*time.Second, "most time to connect to the origin and get its response headers (then 504)")
	gates := f.stringList("gate", "gated path pattern, repeatable (default /: everything); longest pattern wins")
	opens := f.stringList("open", "always-open path pattern, repeatable, such as /static/ or /healthz")
	lang := f.string("lang", gateway.LangAuto, "waiting page language: auto (each visitor's Accept-Language, English fallback), auto:ko (Korean fallback), or en / ko for every visitor")
	waitingTemplate := f.string("waiting-template", "", "operator's html/template for the waiting page (see docs/proxy.md)")
	routes := f.stringList("route", "path prefix → room, repeatable, such as /concert-a/=room-a; longest prefix wins")
	maxConns := f.int("max-conns", 10_000, "most client connections open at once; more wait to be accepted")
	bodyTimeout := f.duration("body-timeout", time.Minute, "most time to read a request's body (websockets exempt)")
	foldCase := f.bool("fold-case", false, "match path rules without regard to case, for origins that ignore case (IIS); otherwise a path whose case changes the rule is refused")
	if err := f.parse(args); err != nil {
		return err
	}
	f.positive("origin-timeout", originTimeout.Seconds())
	f.positive("max-conns", float64(*maxConns))
	f.positive("body-timeout", bodyTimeout.Seconds())
	c.check(f)
	if err := f.check(); err != nil {
		return err
	}
	origin, err := url.Parse(*originFlag)
	if err != nil || (origin.Scheme != "http" && origin.Scheme != "https") || origin.Host == "" {
		return fmt.Errorf("bad setting --origin/%s=%q: want http://host:port or https://…", f.envName("origin"), *originFlag)
	}
	rules := gateway.Rules{DefaultRoom: *room, Gate: *gates, Open: *opens, FoldCase: *foldCase}
	for _, s := range *routes {
		r, err := gateway.ParseRoute(s)
		if err != nil {
			return fmt.Errorf("bad setting --route/%s: %w", f.envName("route"), err)
		}
		rules.Routes = append(rules.Routes, r)
	}
	if err := rules.Validate(); err != nil {
		return fmt.Errorf("bad path rules: %w", err)
	}
	var cl closers
	defer cl.Close()
	log := c.logs.logger(stderr)
	k, err := openCore(ctx, c, log, eventsConfig{}, &cl) // no NATS: no events (docs/architecture.md#events)
	if err != nil {
		return err
	}
	for _, r := range rules.Rooms() {
		if _, err := k.q.EnsureRoom(ctx, r, queue.DefaultSettings()); err != nil {
			return fmt.Errorf("room %s: %w", r, err)
		}
	}
	p, err := gateway.New(gateway.Config{
		Origin: origin, Queue: k.q, Keys: k.keys, Rules: rules, Registry: k.reg,
		API:           k.api(c, httpapi.Config{}, strings.TrimSuffix(gateway.Prefix, "/")+console.Path),
		Logger:        k.log.With("component", "proxy"),
		OriginTimeout: *originTimeout, InsecureCookies: *c.insecure, FailOpen: *c.failOpen, Flood: k.flood, Identity: k.identity,
		BodyTimeout: *bodyTimeout,
		Lang:        *lang, WaitingTemplate: *waitingTemplate,
	})
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler: c.logs.accessLog(log.With("component", "access"), p),
		// No ReadTimeout or WriteTimeout: server-sent events and websockets
		// stream through for as long as they last; the proxy bounds reading
		// a request body itself (--body-timeout).
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	ln, err := listen(c)
	if err != nil {
		return err
	}
	ln = capConns(ln, *maxConns)
	fmt.Fprintf(stdout, "usher proxy serving on %s for %s (store %s, rooms %s)\n",
		baseURL(ln.Addr()), redactURL(origin.String()), redactURL(*c.store), strings.Join(rules.Rooms(), ","))
	return stopped(log, k.run(ctx, srv, ln))
}

// stringList is a repeatable flag whose default comes from its
// variable, comma-separated; the first use of the flag replaces that default.
func (f *flags) stringList(name, usage string) *[]string {
	l := &listFlag{}
	for s := range strings.SplitSeq(f.lookup(name), ",") {
		if s = strings.TrimSpace(s); s != "" {
			l.vals = append(l.vals, s)
		}
	}
	f.Var(l, name, usage+" ($"+f.envName(name)+", comma-separated)")
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
