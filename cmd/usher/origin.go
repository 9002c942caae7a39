package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"

	"usher/internal/loadlab/simorigin"
)

// origin runs a simulated origin site (seed 000's server: worker pool,
// connection pool, service-time distribution) for load tests.
func origin(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newFlags("origin", getenv, stderr)
	logs := addLogFlags(f)
	f.own("origin")
	addr := f.string("addr", ":8081", "listen address")
	workers := f.int("workers", 200, "worker pool: requests handled at once (Tomcat's 200 threads); the rest wait")
	conns := f.int("conns", 10, "connection pool: requests doing work at once (HikariCP's 10); the rest wait")
	service := f.string("service", "lognormal:50ms:0.25", "service time: constant:D, lognormal:MEDIAN:SIGMA, exponential:MEAN or uniform:MIN:MAX")
	timeout := f.duration("timeout", 0, "answer 503 after waiting this long for a worker and a connection (0: wait for ever)")
	seats := f.int("seats", 50_000, "seats that POST /reservations can reserve")
	usherURL := f.string("usher", "", "usher base URL whose gate every request must pass (with --gate-room)")
	room := f.string("gate-room", "", "room whose pass every request must carry (checked by usher's GET /api/v1/rooms/{room}/pass)")
	phasesSpec := f.string("phases", "", "settings that change during the run, from the first request: DURATION:SETTING=VALUE:…, comma-separated, e.g. 30s:conns=10,30s:conns=5,30s:conns=10 (workers, conns, service, timeout)")
	if err := f.parse(args); err != nil {
		return err
	}
	f.positive("workers", float64(*workers))
	f.positive("conns", float64(*conns))
	f.positive("seats", float64(*seats))
	if *timeout < 0 {
		f.errs = append(f.errs, "--timeout: want 0 or more")
	}
	if (*usherURL == "") != (*room == "") {
		f.errs = append(f.errs, "--usher and --gate-room go together")
	}
	dist, err := simorigin.ParseDist(*service)
	if err != nil {
		f.errs = append(f.errs, "--service: "+err.Error())
	}
	phases, err := simorigin.ParsePhases(*phasesSpec)
	if err != nil {
		f.errs = append(f.errs, "--phases: "+err.Error())
	}
	logs.check(f)
	if err := f.check(); err != nil {
		return err
	}
	root := logs.logger(stderr)
	log := root.With("component", "origin")

	cfg := simorigin.Config{Workers: *workers, Conns: *conns, Service: dist, Timeout: *timeout, Seats: *seats, Phases: phases, Logger: log}
	gateDesc := "none"
	if *room != "" {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *workers}, Timeout: 10 * time.Second}
		defer client.CloseIdleConnections()
		cfg.Gate = simorigin.NewRemoteGate(client, *usherURL, *room)
		gateDesc = *usherURL + " room " + *room
	}
	o := simorigin.New(cfg)
	// Requests still waiting for a pool when the origin stops give up at
	// once instead of holding the shutdown.
	base, abandon := context.WithCancel(context.Background())
	defer abandon()
	srv := &http.Server{
		Handler:           logs.accessLog(root.With("component", "access"), o.Handler()),
		BaseContext:       func(net.Listener) context.Context { return base },
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := listenTCP(f.setting("addr", *addr), *addr)
	if err != nil {
		return err
	}
	phaseDesc := ""
	if *phasesSpec != "" {
		phaseDesc = ", phases " + *phasesSpec
	}
	fmt.Fprintf(stdout, "usher origin serving on %s (workers %d, conns %d, service %s, timeout %v, gate %s%s)\n",
		baseURL(ln.Addr()), *workers, *conns, dist, *timeout, gateDesc, phaseDesc)

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		abandon()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	})
	return stopped(log, g.Wait())
}
