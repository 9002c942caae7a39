package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"

	"usher/internal/clientip"
	"usher/internal/gateway"
)

// auth runs the gate for a front proxy that already runs (nginx, Caddy,
// Traefik, Envoy): the forward-auth checks and usher's own routes under
// /_usher/, with the queue, the room views' refresher and the admission
// scheduler, until ctx ends. With --print it writes a front proxy's
// configuration instead (edgeconf.go).
func auth(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newFlags("auth", getenv, stderr)
	c := addCoreFlags(f, "keys, admin key, rooms", "auth-rooms.json", "127.0.0.1:8092")
	f.own("auth")
	g := addGateFlags(f, "front proxy")
	p := addPrintFlags(f)
	releaseAddr := f.string("release-listen", "", "UDP address for the front proxy's Usher-Release reports, such as 127.0.0.1:8079 (--print writes them to it); empty: a released slot expires instead")
	if err := f.parse(args); err != nil {
		return err
	}
	if *p.print != "" {
		return p.write(c, g, *releaseAddr, stdout)
	}
	g.check(f)
	c.check(f)
	if *c.trustedProxies == "" {
		// The front proxy runs beside usher auth: believe its
		// X-Forwarded-For, which names the client.
		c.parsed.trusted, _ = clientip.ParseTrusted("127.0.0.0/8,::1")
	}
	if err := f.check(); err != nil {
		return err
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
	var releases net.PacketConn
	if *releaseAddr != "" {
		if releases, err = net.ListenPacket("udp", *releaseAddr); err != nil {
			return fmt.Errorf("%s: %w", f.setting("release-listen", *releaseAddr), netCause(err))
		}
		cl.add(func() { releases.Close() })
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
	cfg, err := g.config(ctx, c, k, rules, "auth")
	if err != nil {
		return err
	}
	a, err := gateway.NewAuth(cfg)
	if err != nil {
		return err
	}
	srv := edgeServer(c.logs.accessLog(log.With("component", "access"), a))
	ln := g.limit(lns.public, c, srv)
	parts := []func(context.Context) error{a.Pages().Run}
	if releases != nil {
		parts = append(parts, func(ctx context.Context) error { return a.ServeReleases(ctx, releases) })
	}
	k.announce(c, stdout, "usher auth", detail{"store", redactURL(*c.store)}, detail{"rooms", strings.Join(rules.Rooms(), ",")})
	return stopped(log, k.run(ctx, srv, ln, parts...))
}
