package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/redis/rueidis"

	"usher/internal/booking"
	"usher/internal/booking/mysqlbooking"
	"usher/internal/booking/pgbooking"
	"usher/internal/booking/sqlitebooking"
	"usher/internal/hold"
	"usher/internal/hold/memhold"
	"usher/internal/hold/redishold"
	"usher/internal/limit"
	"usher/internal/limit/memlimit"
	"usher/internal/limit/redislimit"
	"usher/internal/mq"
	"usher/internal/mq/natsmq"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/queue/redisqueue"
	"usher/internal/queue/redisroute"
)

// closers releases what the wiring opened, in reverse order.
type closers []func()

func (c *closers) add(f func()) { *c = append(*c, f) }

// Close runs them. Its pointer receiver matters: `defer cl.Close()` then
// reads cl when it runs, not the empty slice it was when deferred.
func (c *closers) Close() error {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
	*c = nil
	return nil
}

// The check functions validate a backend setting without opening anything;
// the subcommands call them before they write a file or open a connection,
// and the open functions below refuse what they refuse.

// checkStore checks a fast store's setting: --store, or --queue-store,
// --hold-store or --limit-store, which default to it.
func checkStore(name, spec string) error {
	if spec == "memory" || isRedis(spec) {
		return nil
	}
	return fmt.Errorf("%s: want memory, redis://…, rediss://…, redis://sentinel:port/db?addr=…&master_set=name (Sentinel) or redis://node:port?addr=node:port… (Cluster)", sharedSetting(name, spec))
}

func checkDB(spec string) error {
	switch {
	case spec == "sqlite", strings.HasPrefix(spec, "sqlite:"),
		strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"),
		strings.HasPrefix(spec, "mysql://"):
		return nil
	}
	return fmt.Errorf("%s: want sqlite (in the data dir), sqlite:PATH, postgres://… or mysql://…", sharedSetting("db", spec))
}

// checkBroker checks the broker and its replicas: 1, 3 or 5, and 1 on the
// embedded server, which is a single node. An external broker is one URL
// or a comma-separated list of the nodes of a cluster (the client picks
// one and moves to another when it goes away).
func checkBroker(spec string, replicas int) error {
	embedded := spec == "embedded"
	if !embedded && !natsURLs(spec) {
		return fmt.Errorf("%s: want embedded, nats://… or a comma-separated list nats://…,nats://…", sharedSetting("nats", spec))
	}
	switch {
	case replicas != 1 && replicas != 3 && replicas != 5:
		return fmt.Errorf("--nats-replicas/USHER_NATS_REPLICAS=%d: want 1, 3 or 5", replicas)
	case embedded && replicas != 1:
		return fmt.Errorf("--nats-replicas/USHER_NATS_REPLICAS=%d: the embedded NATS server is one node; want 1, or a clustered nats://…", replicas)
	}
	return nil
}

// natsURLs reports whether spec is a comma-separated list of nats:// or
// tls:// URLs with a host each (spaces around the commas allowed).
func natsURLs(spec string) bool {
	for u := range strings.SplitSeq(spec, ",") {
		u = strings.TrimSpace(u)
		rest, ok := strings.CutPrefix(u, "nats://")
		if !ok {
			rest, ok = strings.CutPrefix(u, "tls://")
		}
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			rest = rest[at+1:]
		}
		if !ok || rest == "" || strings.HasPrefix(rest, ":") || strings.Contains(rest, " ") {
			return false
		}
	}
	return true
}

// fastStores opens the fast tier: the queue, hold and limit stores, each
// from its own setting. Settings that name the same Redis share one
// client, opened once and closed by cl.
type fastStores struct {
	prefix string
	cl     *closers
	redis  map[string]rueidis.Client
}

// client is the Redis client for spec (a redis:// or rediss:// URL; a
// master_set goes through Sentinel, a cluster's nodes give a cluster
// client: redisqueue.Open), opened on first use.
func (f *fastStores) client(ctx context.Context, name, spec string) (rueidis.Client, error) {
	if c, ok := f.redis[spec]; ok {
		return c, nil
	}
	c, err := redisqueue.Open(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sharedSetting(name, spec), err)
	}
	if f.redis == nil {
		f.redis = map[string]rueidis.Client{}
	}
	f.redis[spec] = c
	f.cl.add(c.Close)
	return c, nil
}

// isRedis reports whether spec names a Redis server.
func isRedis(spec string) bool {
	return strings.HasPrefix(spec, "redis://") || strings.HasPrefix(spec, "rediss://")
}

// queue is the switch that picks the queue store. The memory store keeps
// its rooms in roomsFile ("": nowhere), creating its directory.
func (f *fastStores) queue(ctx context.Context, name, spec, roomsFile string) (queue.Store, error) {
	switch {
	case spec == "memory" && roomsFile == "":
		return memqueue.New(), nil
	case spec == "memory":
		dataDir := filepath.Dir(roomsFile)
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("%s: %w", sharedSetting("data-dir", dataDir), err)
		}
		qs, err := memqueue.Open(roomsFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sharedSetting("data-dir", dataDir), err)
		}
		return qs, nil
	case isRedis(spec):
		c, err := f.client(ctx, name, spec)
		if err != nil {
			return nil, err
		}
		ack, err := redisqueue.ParseAck(spec) // client's Open has checked it
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sharedSetting(name, spec), err)
		}
		r := redisroute.New(c, f.prefix)
		r.SetAck(ack)
		return r, nil
	}
	return nil, fmt.Errorf("bad setting: %w", checkStore(name, spec))
}

// hold is the switch that picks the hold store.
func (f *fastStores) hold(ctx context.Context, name, spec string) (hold.Store, error) {
	switch {
	case spec == "memory":
		return memhold.New(), nil
	case isRedis(spec):
		c, err := f.client(ctx, name, spec)
		if err != nil {
			return nil, err
		}
		return redishold.New(c, f.prefix+"hold:"), nil
	}
	return nil, fmt.Errorf("bad setting: %w", checkStore(name, spec))
}

// limit is the switch that picks the store of per-client limits.
func (f *fastStores) limit(ctx context.Context, name, spec string) (limit.Store, error) {
	switch {
	case spec == "memory":
		return memlimit.New(), nil
	case isRedis(spec):
		c, err := f.client(ctx, name, spec)
		if err != nil {
			return nil, err
		}
		return redislimit.New(c, f.prefix), nil
	}
	return nil, fmt.Errorf("bad setting: %w", checkStore(name, spec))
}

// sqlitePath is the file of a SQLite --db setting ("" for the data
// directory's), or ok false for PostgreSQL.
func sqlitePath(spec string) (path string, ok bool) {
	if spec != "sqlite" && !strings.HasPrefix(spec, "sqlite:") {
		return "", false
	}
	return strings.TrimPrefix(strings.TrimPrefix(spec, "sqlite"), ":"), true
}

// checkDBDir checks that the directory of a sqlite:PATH database can be
// written (the data directory is checked with the others).
func checkDBDir(spec string) error {
	if path, _ := sqlitePath(spec); path != "" {
		return checkWritable(sharedSetting("db", spec), filepath.Dir(path))
	}
	return nil
}

// openCatalog is the switch that picks the SQL database.
func openCatalog(ctx context.Context, spec, dataDir string, pool int, cl *closers) (booking.Store, error) {
	if path, ok := sqlitePath(spec); ok {
		if path == "" {
			path = filepath.Join(dataDir, "usher.db")
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("%s: %w", sharedSetting("db", spec), err)
		}
		s, err := sqlitebooking.Open(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", sharedSetting("db", spec), path, err)
		}
		cl.add(func() { s.Close() })
		return s, nil
	}
	switch {
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		s, err := pgbooking.Open(ctx, spec, pool)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sharedSetting("db", spec), err)
		}
		cl.add(func() { s.Close() })
		return s, nil
	case strings.HasPrefix(spec, "mysql://"):
		s, err := mysqlbooking.Open(ctx, spec, pool)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sharedSetting("db", spec), err)
		}
		cl.add(func() { s.Close() })
		return s, nil
	default:
		return nil, fmt.Errorf("bad setting: %w", checkDB(spec))
	}
}

// openBroker is the switch that picks the message broker: NATS embedded in
// this process (JetStream files in the data dir) or an external server. It
// also returns the connection (for the event stream).
func openBroker(ctx context.Context, spec string, o natsmq.Options, dataDir string, log *slog.Logger, cl *closers) (mq.Broker, *nats.Conn, error) {
	var nc *nats.Conn
	switch {
	case spec == "embedded":
		srv, err := natsmq.StartEmbedded(filepath.Join(dataDir, "nats"), log)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", sharedSetting("data-dir", dataDir), err)
		}
		cl.add(func() { srv.Shutdown(); srv.WaitForShutdown() })
		if nc, err = natsmq.ConnectEmbedded(srv); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", sharedSetting("nats", spec), err)
		}
	case natsURLs(spec):
		var err error
		if nc, err = nats.Connect(spec, nats.Name("usher"), nats.MaxReconnects(-1)); err != nil {
			return nil, nil, fmt.Errorf("%s: %w: %w", sharedSetting("nats", spec), mq.ErrUnavailable, err)
		}
	default:
		return nil, nil, fmt.Errorf("bad setting: %w", checkBroker(spec, o.Replicas))
	}
	cl.add(nc.Close)
	o.Logger = log.With("component", "mq")
	b, err := natsmq.Open(ctx, nc, o)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", sharedSetting("nats", spec), err)
	}
	return b, nc, nil
}

// redactURL hides a password in a connection URL, or in each of a
// comma-separated list.
func redactURL(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		if !strings.Contains(p, "://") { // not a list: a comma in a password, say
			return redactOne(s)
		}
		parts[i] = redactOne(p)
	}
	return strings.Join(parts, ",")
}

func redactOne(s string) string {
	if at := strings.LastIndex(s, "@"); at >= 0 {
		if scheme := strings.Index(s, "://"); scheme >= 0 && scheme < at {
			return s[:scheme+3] + "…" + s[at:]
		}
	}
	return s
}
