package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"

	"usher/internal/analytics"
	"usher/internal/booking"
	"usher/internal/collector"
	"usher/internal/httpapi"
	"usher/internal/mq"
	"usher/internal/mq/natsmq"
	"usher/internal/sale"
)

// serve runs the API server with the booking backbone, the room views'
// refresher, the admission scheduler and the reservation consumer until ctx
// ends, then shuts them down.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newFlags("serve", getenv, stderr)
	c := addCoreFlags(f, "keys, admin key, rooms, SQLite, NATS", "rooms.json", "127.0.0.1:8090")
	db := f.string("db", "sqlite", "booking database: sqlite (<data-dir>/usher.db), sqlite:PATH, postgres://… or mysql://…")
	dbPool := f.int("db-pool", 10, "database connections at most; also the reservation consumer's concurrency")
	broker := f.string("nats", "embedded", "message broker: embedded (NATS in this process, files in <data-dir>/nats) or nats://…")
	natsName := f.string("nats-name", "usher", "name of this deployment's stream, consumer and bucket on NATS")
	natsReplicas := f.int("nats-replicas", 1, "replicas of the stream and the bucket on a clustered NATS (1, 3 or 5)")
	events := f.string("events", "true", "publish events (queue, holds, settings, and the reservation decisions' outbox): true (the NATS stream <NAME>_EVENTS), false, or kafka://host:port,… (the Kafka topic <NAME>.events)")
	holdTTL := f.duration("hold-ttl", 5*time.Minute, "how long a seat or stock hold lasts")
	seatLimit := f.int("seat-limit", 4, "most seats a visitor holds at once in a schedule, and per reservation")
	stockLimit := f.int("stock-limit", 4, "most general-admission units a visitor holds at once in a schedule")
	buyerLimit := f.int("buyer-limit", 0, "most tickets (seats and units) a visitor buys of a schedule across its reservations; 0: no limit")
	seatMapEvery := f.duration("seat-map-every", 500*time.Millisecond, "most often a schedule's seat map is rebuilt from the database")
	collect := f.bool("collect", true, "run the collector: count this deployment's event stream into analytics tables in --db (SQLite: <data-dir>/analytics.db)")
	conns := addConnFlags(f, 5*time.Second)
	inventoryEvery := f.duration("inventory-every", time.Second, "how often each schedule's units left are counted into its room (sold out at 0, visitors_per_unit); 0: never")
	if err := f.parse(args); err != nil {
		return err
	}
	f.positive("db-pool", float64(*dbPool))
	f.positive("nats-replicas", float64(*natsReplicas))
	f.positive("hold-ttl", holdTTL.Seconds())
	f.positive("seat-limit", float64(*seatLimit))
	f.positive("stock-limit", float64(*stockLimit))
	if *buyerLimit < 0 {
		f.errs = append(f.errs, "--buyer-limit: want 0 (no limit) or more")
	}
	f.positive("seat-map-every", seatMapEvery.Seconds())
	conns.check(f)
	if *inventoryEvery < 0 {
		f.errs = append(f.errs, "--inventory-every: want a duration, or 0 for never")
	} else if *inventoryEvery == 0 {
		*inventoryEvery = sale.NoInventory
	}
	c.check(f)
	evTo, evErr := parseEvents(*events)
	for _, err := range []error{checkDB(*db), checkBroker(*broker, *natsReplicas), evErr} {
		if err != nil {
			f.errs = append(f.errs, err.Error())
		}
	}
	if err := f.check(); err != nil {
		return err // before anything is written or opened
	}

	if err := c.checkDirs(isEmbeddedOrSQLite(*broker, *db)); err != nil {
		return err
	}
	if err := checkDBDir(*db); err != nil {
		return err
	}
	var cl closers
	defer cl.Close()
	lns, err := c.listen(&cl)
	if err != nil {
		return err
	}
	log := c.logs.logger(stderr)
	var (
		catalog booking.Store
		an      *analytics.Analytics
		mqb     mq.Broker
		nc      *nats.Conn
		kc, kcc *kgo.Client // Kafka: the publishers', the collector's
	)
	_, sqlite := sqlitePath(*db)
	o, err := c.open(ctx, log, &cl,
		step{local: sqlite, open: func() (err error) {
			catalog, err = openCatalog(ctx, *db, *c.dataDir, *dbPool, &cl)
			return err
		}},
		step{local: sqlite, open: func() (err error) {
			an, err = openAnalytics(ctx, *db, *c.dataDir, *dbPool, analytics.Options{}, &cl)
			return err
		}},
		step{local: *broker == "embedded", open: func() (err error) {
			mqb, nc, err = openBroker(ctx, *broker, natsmq.Options{Name: *natsName, Replicas: *natsReplicas}, *c.dataDir, log, &cl)
			if err == nil && evTo.kind == "nats" {
				if err = ensureEventStream(ctx, nc, *natsName, *natsReplicas); err != nil {
					err = fmt.Errorf("%s: %w", sharedSetting("nats", *broker), err)
				}
			}
			return err
		}},
		step{open: func() (err error) {
			if evTo.kind != "kafka" {
				return nil
			}
			setting := sharedSetting("events", *events)
			if kc, err = openKafka(ctx, setting, evTo.brokers, "usher", *natsName, &cl); err != nil || !*collect {
				return err
			}
			kcc, err = openKafka(ctx, setting, evTo.brokers, "usher collector", *natsName, &cl, collector.KafkaOpts(collector.Options{Prefix: *natsName})...)
			return err
		}},
	)
	if err != nil {
		return err
	}
	ec := eventsConfig{prefix: *natsName, replicas: *natsReplicas}
	switch evTo.kind {
	case "nats":
		ec.nc = nc
	case "kafka":
		ec.kc = kc
	}
	k, err := openCore(c, o, lns, log, ec)
	if err != nil {
		return err
	}
	relay, err := k.relay(catalog)
	if err != nil {
		return err
	}
	sales := sale.New(sale.Config{
		Catalog: catalog, Holds: k.holds, Broker: mqb, Queue: k.q,
		HoldTTL: *holdTTL, SeatLimit: *seatLimit, StockLimit: *stockLimit, BuyerLimit: *buyerLimit, SnapshotEvery: *seatMapEvery, Workers: *dbPool,
		InventoryEvery: *inventoryEvery, Events: k.emitter(),
		Logger:   k.log.With("component", "sale"),
		Registry: k.reg,
	})
	if err := sales.RebuildStock(ctx); err != nil {
		return err
	}
	counting, err := collectorPart(*collect, an, nc, kcc, *natsName, k)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:      c.logs.accessLog(log.With("component", "access"), k.api(c, httpapi.Config{Sale: sales, Analytics: an})),
		ReadTimeout:  15 * time.Second,
		WriteTimeout: 30 * time.Second,
		IdleTimeout:  2 * time.Minute,
	}
	ln := conns.bound(lns.public, srv, c.parsed.trusted)
	details := []detail{{"store", redactURL(*c.store)}, {"db", redactURL(*db)}, {"nats", redactURL(*broker)}}
	if evTo.kind == "kafka" {
		details = append(details, detail{"events", redactURL(*events)})
	}
	k.announce(c, stdout, "usher", details...)
	parts := []func(context.Context) error{sales.Run, counting}
	if relay != nil {
		parts = append(parts, relay)
	}
	return stopped(log, k.run(ctx, srv, ln, parts...))
}

// isEmbeddedOrSQLite reports whether serve's broker or database keeps
// files in the data directory.
func isEmbeddedOrSQLite(broker, db string) bool {
	path, sqlite := sqlitePath(db)
	return broker == "embedded" || sqlite && path == ""
}

// loadOrCreateAdminKey reads <dataDir>/admin.key, creating it with a random
// key on first start, so that a newcomer's server is never left open.
func loadOrCreateAdminKey(dataDir string, log *slog.Logger) (string, error) {
	path := filepath.Join(dataDir, "admin.key")
	if b, err := os.ReadFile(path); err == nil {
		key := strings.TrimSpace(string(b))
		if len(key) < minAdminKey {
			return "", fmt.Errorf("%s: admin key file %s: %d characters, want at least %d (delete it to generate one, or give --admin-key)",
				sharedSetting("data-dir", dataDir), path, len(key), minAdminKey)
		}
		return key, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%s: admin key: %w", sharedSetting("data-dir", dataDir), err)
	}
	buf := make([]byte, 24)
	rand.Read(buf)
	key := base64.RawURLEncoding.EncodeToString(buf)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("%s: admin key: %w", sharedSetting("data-dir", dataDir), err)
	}
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("%s: admin key: %w", sharedSetting("data-dir", dataDir), err)
	}
	log.Info("generated an admin API key", "file", path)
	return key, nil
}
