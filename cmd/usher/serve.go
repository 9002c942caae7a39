package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
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
	"golang.org/x/sync/errgroup"

	"usher/internal/admission"
	"usher/internal/httpapi"
	"usher/internal/mq/natsmq"
	"usher/internal/queue"
	"usher/internal/sale"
	"usher/internal/token"
)

// serve runs the API server, the room views' refresher and the admission
// scheduler until ctx ends, then shuts them down.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newFlags("serve", getenv, stderr)
	addr := f.string("addr", ":8080", "listen address")
	store := f.string("store", "memory", "queue and hold store: memory (one instance, lost on restart) or redis://host:port/db")
	dataDir := f.string("data-dir", "./data", "directory for what the embedded defaults keep (keys, admin key, SQLite, NATS)")
	keysFlag := f.string("keys-dir", "", "signing keys directory, shared by all instances (default <data-dir>/keys)")
	adminKey := f.string("admin-key", "", "admin API key (default: generated into <data-dir>/admin.key)")
	redisPrefix := f.string("redis-prefix", "usher:", "prefix of every Redis key")
	failOpen := f.bool("fail-open", false, "let visitors with a signed pass through when the store is down")
	insecure := f.bool("insecure-cookies", false, "drop the Secure cookie attribute (plain HTTP on a non-localhost host)")
	db := f.string("db", "sqlite", "booking database: sqlite (<data-dir>/usher.db), sqlite:PATH or postgres://…")
	dbPool := f.int("db-pool", 10, "database connections at most; also the reservation consumer's concurrency")
	broker := f.string("nats", "embedded", "message broker: embedded (NATS in this process, files in <data-dir>/nats) or nats://…")
	natsName := f.string("nats-name", "usher", "name of this deployment's stream, consumer and bucket on NATS")
	natsReplicas := f.int("nats-replicas", 1, "replicas of the stream and the bucket on a clustered NATS (1, 3 or 5)")
	holdTTL := f.duration("hold-ttl", 5*time.Minute, "how long a seat or stock hold lasts")
	seatLimit := f.int("seat-limit", 4, "most seats a visitor holds at once in a schedule, and per reservation")
	stockLimit := f.int("stock-limit", 4, "most general-admission units a visitor holds at once in a schedule")
	seatMapEvery := f.duration("seat-map-every", 500*time.Millisecond, "most often a schedule's seat map is rebuilt from the database")
	if err := f.parse(args); err != nil {
		return err
	}
	f.positive("db-pool", float64(*dbPool))
	f.positive("nats-replicas", float64(*natsReplicas))
	f.positive("hold-ttl", holdTTL.Seconds())
	f.positive("seat-limit", float64(*seatLimit))
	f.positive("stock-limit", float64(*stockLimit))
	f.positive("seat-map-every", seatMapEvery.Seconds())
	if err := f.check(); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	var cl closers
	defer cl.Close()
	qs, hs, err := openStores(ctx, *store, *redisPrefix, &cl)
	if err != nil {
		return err
	}
	catalog, err := openCatalog(ctx, *db, *dataDir, *dbPool, &cl)
	if err != nil {
		return err
	}
	mqb, err := openBroker(ctx, *broker, natsmq.Options{Name: *natsName, Replicas: *natsReplicas}, *dataDir, log, &cl)
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
	sched := admission.New(q, log.With("component", "admission"))
	sales := sale.New(sale.Config{
		Catalog: catalog, Holds: hs, Broker: mqb, Queue: q,
		HoldTTL: *holdTTL, SeatLimit: *seatLimit, StockLimit: *stockLimit, SnapshotEvery: *seatMapEvery, Workers: *dbPool,
		Logger: log.With("component", "sale"),
	})
	srv := &http.Server{
		Handler: httpapi.NewServer(httpapi.Config{
			Queue: q, Keys: keys, AdminKey: *adminKey, Registry: reg, Sale: sales,
			Logger: log.With("component", "http"), InsecureCookies: *insecure, FailOpen: *failOpen,
		}),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("bad setting --addr/USHER_ADDR=%q: %w", *addr, err)
	}
	fmt.Fprintf(stdout, "usher serving on http://%s (store %s, db %s, nats %s)\n", ln.Addr(), redactURL(*store), redactURL(*db), redactURL(*broker))

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return q.Run(gctx) })
	g.Go(func() error { return sched.Run(gctx) })
	g.Go(func() error { return sales.Run(gctx) })
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
		return srv.Shutdown(shutdown)
	})
	return g.Wait()
}

// loadOrCreateAdminKey reads <dataDir>/admin.key, creating it with a random
// key on first start, so that a newcomer's server is never left open.
func loadOrCreateAdminKey(dataDir string, log *slog.Logger) (string, error) {
	path := filepath.Join(dataDir, "admin.key")
	if b, err := os.ReadFile(path); err == nil {
		if key := strings.TrimSpace(string(b)); key != "" {
			return key, nil
		}
		return "", fmt.Errorf("admin key file %s is empty", path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("admin key: %w", err)
	}
	buf := make([]byte, 24)
	rand.Read(buf)
	key := base64.RawURLEncoding.EncodeToString(buf)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("admin key: %w", err)
	}
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("admin key: %w", err)
	}
	log.Info("generated an admin API key", "file", path)
	return key, nil
}
