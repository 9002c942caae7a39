package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"usher/internal/gateway"
)

// proxy runs the gating reverse proxy in front of an origin, with the queue,
// the room views' refresher and the admission scheduler, until ctx ends.
func proxy(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newFlags("proxy", getenv, stderr)
	c := addCoreFlags(f, "keys, admin key, rooms", "proxy-rooms.json", "127.0.0.1:8091")
	f.own("proxy")
	originFlag := f.string("origin", "", "origin URL to gate, such as http://127.0.0.1:9000 (required)")
	originTimeout := f.duration("origin-timeout", 30*time.Second, "most time to connect to the origin and get its response headers (then 504)")
	g := addGateFlags(f, "proxy")
	if err := f.parse(args); err != nil {
		return err
	}
	f.positive("origin-timeout", originTimeout.Seconds())
	g.check(f)
	c.check(f)
	if err := f.check(); err != nil {
		return err
	}
	origin, err := url.Parse(*originFlag)
	if err != nil || (origin.Scheme != "http" && origin.Scheme != "https") || origin.Host == "" {
		return fmt.Errorf("bad setting: --origin/%s=%q: want http://host:port or https://…", f.envName("origin"), *originFlag)
	}
	rules, err := g.rules(f)
	if err != nil {
		return err
	}
	if err := c.checkDirs(false); err != nil {
		return err
	}
	var cl closers
	defer cl.Close()
	lns, err := c.listen(&cl)
	if err != nil {
		return err
	}
	log := c.logs.logger(stderr)
	o, err := c.open(ctx, log, &cl)
	if err != nil {
		return err
	}
	k, err := openCore(c, o, lns, log, eventsConfig{}) // no NATS: no events (docs/architecture.md#events)
	if err != nil {
		return err
	}
	cfg, err := g.config(ctx, c, k, rules, "proxy")
	if err != nil {
		return err
	}
	cfg.Origin, cfg.OriginTimeout = origin, *originTimeout
	p, err := gateway.New(cfg)
	if err != nil {
		return err
	}
	srv := edgeServer(c.logs.accessLog(log.With("component", "access"), p))
	ln := g.limit(lns.public, c, srv)
	k.announce(c, stdout, "usher proxy", detail{"origin", redactURL(origin.String())}, detail{"store", redactURL(*c.store)},
		detail{"rooms", strings.Join(rules.Rooms(), ",")})
	return stopped(log, k.run(ctx, srv, ln, p.Pages().Run))
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
