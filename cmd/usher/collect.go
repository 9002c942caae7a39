package main

import (
	"context"
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

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"usher/internal/analytics"
	"usher/internal/analytics/mysqlanalytics"
	"usher/internal/analytics/pganalytics"
	"usher/internal/analytics/sqliteanalytics"
	"usher/internal/collector"
	"usher/internal/event"
	"usher/internal/event/kafkaevent"
)

// collect runs the collector on its own: an external NATS's event stream,
// or a Kafka cluster's event topic, counted into the analytics tables of
// --db, until ctx ends.
func collect(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newFlags("collect", getenv, stderr)
	db := f.string("db", "sqlite", "analytics database: sqlite (<data-dir>/analytics.db), sqlite:PATH (beside it: PATH less its extension, plus -analytics.db), postgres://… or mysql://… (the booking database: tables of their own)")
	dataDir := f.string("data-dir", "./data", "directory for what the embedded defaults keep (the SQLite analytics file)")
	metricsAddr := f.string("metrics-addr", "", "a listen address that serves /metrics (the collector's events and lag); empty: none")
	logs := addLogFlags(f)
	f.own("collect")
	broker := f.string("nats", "", "the NATS server or cluster whose event stream is counted: nats://… or tls://… (this or --kafka)")
	kafka := f.string("kafka", "", "the Kafka cluster whose event topic is counted (usher serve --events kafka://…): kafka://host:port,… (this or --nats)")
	natsName := f.string("nats-name", "usher", "the deployment's name (usher serve --nats-name): stream <NAME>_EVENTS on NATS, topic <NAME>.events on Kafka")
	durable := f.string("consumer", "collector", "the durable consumer's name (Kafka: group <NAME>.<consumer>); collectors with one name share the work")
	pool := f.int("db-pool", 4, "PostgreSQL connections at most")
	batch := f.int("batch", 256, "the most events counted in one transaction")
	o := analyticsFlags(f)
	if err := f.parse(args); err != nil {
		return err
	}
	f.positive("db-pool", float64(*pool))
	f.positive("batch", float64(*batch))
	o.check(f)
	logs.check(f)
	var brokers []string
	switch {
	case *kafka != "" && *broker != "":
		f.errs = append(f.errs, "--nats/USHER_COLLECT_NATS and --kafka/USHER_COLLECT_KAFKA: want one of them")
	case *kafka != "":
		var err error
		if brokers, err = kafkaevent.ParseURL(*kafka); err != nil {
			f.errs = append(f.errs, fmt.Sprintf("%s: want kafka://host:port[,host:port…]", f.setting("kafka", *kafka)))
		}
	case !strings.HasPrefix(*broker, "nats://") && !strings.HasPrefix(*broker, "tls://"):
		f.errs = append(f.errs, fmt.Sprintf("--nats/USHER_COLLECT_NATS=%q: want nats://… or tls://…, or --kafka kafka://… (the embedded server runs inside usher serve, whose --collect counts its events)", redactURL(*broker)))
	}
	if !validNATSName(*natsName) {
		f.errs = append(f.errs, fmt.Sprintf("--nats-name/USHER_COLLECT_NATS_NAME=%q: want letters, digits, '-' and '_'", *natsName))
	}
	if err := checkDB(*db); err != nil {
		f.errs = append(f.errs, err.Error())
	}
	if err := f.check(); err != nil {
		return err
	}
	if path, sqlite := sqlitePath(*db); sqlite && path == "" {
		if err := checkWritable(f.setting("data-dir", *dataDir), *dataDir); err != nil {
			return err
		}
	}
	if err := checkDBDir(*db); err != nil {
		return err
	}
	var cl closers
	defer cl.Close()
	var metrics net.Listener
	if *metricsAddr != "" {
		var err error
		if metrics, err = listenTCP(f.setting("metrics-addr", *metricsAddr), *metricsAddr); err != nil {
			return err
		}
		cl.add(func() { metrics.Close() })
	}
	log := logs.logger(stderr)
	reg := prometheus.NewRegistry()
	var (
		an *analytics.Analytics
		nc *nats.Conn
		kc *kgo.Client
	)
	co := collector.Options{
		Prefix: *natsName, Durable: *durable, Batch: *batch, Registerer: reg, Logger: log.With("component", "collector"),
	}
	_, sqlite := sqlitePath(*db)
	err := openInOrder(
		step{open: func() (err error) {
			if brokers != nil {
				kc, err = openKafka(ctx, f.setting("kafka", *kafka), brokers, "usher collect", *natsName, &cl, collector.KafkaOpts(co)...)
				return err
			}
			if nc, err = nats.Connect(*broker, nats.Name("usher collect"), nats.MaxReconnects(-1)); err != nil {
				return fmt.Errorf("%s: %w", f.setting("nats", *broker), err)
			}
			cl.add(nc.Close)
			return nil
		}},
		step{local: sqlite, open: func() (err error) {
			an, err = openAnalytics(ctx, *db, *dataDir, *pool, o.options(), &cl)
			return err
		}},
	)
	if err != nil {
		return err
	}
	// The one switch of the event source.
	var col *collector.Collector
	switch {
	case kc != nil:
		col, err = collector.NewKafka(kc, an, co)
		if err == nil {
			fmt.Fprintf(stdout, "usher collecting %s (group %s.%s) from %s into %s\n", event.Topic(*natsName), *natsName, *durable, redactURL(*kafka), redactURL(*db))
		}
	default:
		col, err = collector.New(nc, an, co)
		if err == nil {
			fmt.Fprintf(stdout, "usher collecting %s from %s into %s\n", natsName2stream(*natsName), redactURL(*broker), redactURL(*db))
		}
	}
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return col.Run(gctx) })
	if metrics != nil {
		g.Go(func() error { return serveRegistry(gctx, metrics, reg, log) })
	}
	return stopped(log, g.Wait())
}

// analyticsOptions are the collector's retention settings.
type analyticsOptions struct {
	retention, dedupe, maxWait *time.Duration
	recent                     *int
}

func analyticsFlags(f *flags) analyticsOptions {
	return analyticsOptions{
		retention: f.duration("retention", 90*24*time.Hour, "how long per-minute rows are kept"),
		dedupe:    f.duration("dedupe", 7*24*time.Hour, "how long event IDs are kept for de-duplication; older events are ignored"),
		maxWait:   f.duration("max-wait", 24*time.Hour, "how long a waiting visitor's entry is kept to pair it with its admission"),
		recent:    f.int("recent", 1000, "how many recent events each room's timeline keeps"),
	}
}

func (o analyticsOptions) check(f *flags) {
	f.positive("retention", o.retention.Seconds())
	f.positive("dedupe", o.dedupe.Seconds())
	f.positive("max-wait", o.maxWait.Seconds())
	f.positive("recent", float64(*o.recent))
}

func (o analyticsOptions) options() analytics.Options {
	return analytics.Options{Retention: *o.retention, Dedupe: *o.dedupe, MaxWait: *o.maxWait, Recent: *o.recent}
}

func validNATSName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func natsName2stream(name string) string { return strings.ToUpper(name) + "_EVENTS" }

// openAnalytics is the switch that picks the analytics database, from the
// booking database's setting: PostgreSQL or MySQL holds both (tables of their
// own); SQLite gets a file of its own beside the booking file, so that the
// collector's writes never wait on sqlitebooking's one writer (and its
// Decide batches never wait on them).
func openAnalytics(ctx context.Context, spec, dataDir string, pool int, o analytics.Options, cl *closers) (*analytics.Analytics, error) {
	switch {
	case spec == "sqlite" || strings.HasPrefix(spec, "sqlite:"):
		path := analyticsPath(spec, dataDir)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("%s: %w", sharedSetting("db", spec), err)
		}
		s, err := sqliteanalytics.Open(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("%s: analytics %s: %w", sharedSetting("db", spec), path, err)
		}
		cl.add(func() { s.Close() })
		return analytics.New(s, o), nil
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		s, err := pganalytics.Open(ctx, spec, pool)
		if err != nil {
			return nil, fmt.Errorf("%s: analytics: %w", sharedSetting("db", spec), err)
		}
		cl.add(func() { s.Close() })
		return analytics.New(s, o), nil
	case strings.HasPrefix(spec, "mysql://"):
		s, err := mysqlanalytics.Open(ctx, spec, pool)
		if err != nil {
			return nil, fmt.Errorf("%s: analytics: %w", sharedSetting("db", spec), err)
		}
		cl.add(func() { s.Close() })
		return analytics.New(s, o), nil
	default:
		return nil, fmt.Errorf("bad setting: %w", checkDB(spec))
	}
}

// analyticsPath is the SQLite analytics file of a --db setting:
// <data-dir>/analytics.db for sqlite, PATH less its extension plus
// "-analytics.db" for sqlite:PATH.
func analyticsPath(spec, dataDir string) string {
	path := strings.TrimPrefix(strings.TrimPrefix(spec, "sqlite"), ":")
	if path == "" {
		return filepath.Join(dataDir, "analytics.db")
	}
	return strings.TrimSuffix(path, filepath.Ext(path)) + "-analytics.db"
}

// collectorPart is serve's collector, counting into an, as a part to run
// (one that returns at once when on is false): on kc, the Kafka client of
// the collector's group, when the events go to Kafka; else on the broker
// connection nc.
func collectorPart(on bool, an *analytics.Analytics, nc *nats.Conn, kc *kgo.Client, natsName string, k *core) (func(context.Context) error, error) {
	if !on {
		return func(context.Context) error { return nil }, nil
	}
	o := collector.Options{Prefix: natsName, Registerer: k.reg, Logger: k.log.With("component", "collector")}
	var (
		col *collector.Collector
		err error
	)
	if kc != nil {
		col, err = collector.NewKafka(kc, an, o)
	} else {
		col, err = collector.New(nc, an, o)
	}
	if err != nil {
		return nil, err
	}
	return col.Run, nil
}

// serveRegistry serves reg's /metrics on ln until ctx ends.
func serveRegistry(ctx context.Context, ln net.Listener, reg *prometheus.Registry, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
	log.Info("metrics serving", "url", baseURL(ln.Addr())+"/metrics")
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
