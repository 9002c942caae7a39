// Package pganalytics is the analytics.Store on PostgreSQL (pgx v5).
//
// Its tables live in the booking database, beside pgbooking's (the same
// --db URL and search_path), with their own migrations table
// (analytics_migrations) and their own advisory lock, so the two
// migrate independently. PostgreSQL has no single-writer lock: the
// collector's transactions and the booking decisions only share the
// server's capacity. Each Update is one transaction of a few round trips
// (the IDs are claimed with one INSERT … ON CONFLICT DO NOTHING RETURNING,
// entries taken with one DELETE … RETURNING, the rest sent as one batch).
// Two collectors may run on one database: a claimed ID blocks the other
// transaction until the first commits, and rows are written in a fixed
// order (sorted), so they do not deadlock on each other.
//
// Errors reaching the server wrap analytics.ErrUnavailable.
package pganalytics

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"usher/internal/analytics"
	"usher/internal/event"
	"usher/internal/hist"
	"usher/internal/sqlmigrate"
)

var _ analytics.Store = (*Store)(nil)

//go:embed migrations/*.sql
var migrations embed.FS

const (
	defaultConnectTimeout = 5 * time.Second
	migrationLock         = int64(0x75736865725f616e) // "usher_an"
)

// Store is an analytics.Store on a PostgreSQL pool.
type Store struct{ pool *pgxpool.Pool }

// Open connects with at most poolSize connections and applies the embedded
// migrations. The URL's search_path must name an existing schema.
func Open(ctx context.Context, url string, poolSize int) (*Store, error) {
	if poolSize < 1 {
		return nil, fmt.Errorf("pganalytics: open: pool size %d: %w", poolSize, analytics.ErrInvalid)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pganalytics: open: %w: %w", analytics.ErrInvalid, err)
	}
	cfg.MaxConns = int32(poolSize)
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, wrap("open", err)
	}
	var schema *string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		pool.Close()
		return nil, wrap("open", err)
	}
	if schema == nil {
		pool.Close()
		return nil, fmt.Errorf("pganalytics: open: no schema of the search_path exists: %w", analytics.ErrInvalid)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, wrap("open: migrate", err)
	}
	return &Store{pool: pool}, nil
}

// Close closes the pool.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return sqlmigrate.Postgres(ctx, pool, migrations, "migrations", "analytics_migrations", migrationLock)
}

// Update implements analytics.Store.
func (s *Store) Update(ctx context.Context, fn func(context.Context, analytics.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return wrap("update", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := fn(ctx, &txn{tx}); err != nil {
		return err
	}
	return wrap("update: commit", tx.Commit(ctx))
}

type txn struct{ tx pgx.Tx }

func (t *txn) Claim(ctx context.Context, ids []string, at []time.Time) (map[string]bool, error) {
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(ids[a], ids[b]) })
	sid, sat := make([]string, len(ids)), make([]time.Time, len(ids))
	for i, j := range order {
		sid[i], sat[i] = ids[j], at[j]
	}
	rows, err := t.tx.Query(ctx, `INSERT INTO analytics_seen (id, at)
		SELECT * FROM unnest($1::text[], $2::timestamptz[]) ON CONFLICT DO NOTHING RETURNING id`, sid, sat)
	if err != nil {
		return nil, wrap("claim", err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, wrap("claim", err)
	}
	out := make(map[string]bool, len(got))
	for _, id := range got {
		out[id] = true
	}
	return out, nil
}

func (t *txn) TakeEntries(ctx context.Context, vs []analytics.Visit) ([]analytics.Entry, error) {
	slices.SortFunc(vs, func(a, b analytics.Visit) int {
		return cmp.Or(cmp.Compare(a.Room, b.Room), cmp.Compare(a.Visitor, b.Visitor))
	})
	rooms, visitors := make([]string, len(vs)), make([]string, len(vs))
	for i, v := range vs {
		rooms[i], visitors[i] = v.Room, v.Visitor
	}
	rows, err := t.tx.Query(ctx, `DELETE FROM analytics_entries e USING unnest($1::text[], $2::text[]) AS v (room, visitor)
		WHERE e.room = v.room AND e.visitor = v.visitor RETURNING e.room, e.visitor, e.at, e.eta_ms, e.admitted_at`, rooms, visitors)
	if err != nil {
		return nil, wrap("take entries", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (analytics.Entry, error) {
		var e analytics.Entry
		var at, admitted *time.Time
		err := r.Scan(&e.Room, &e.Visitor, &at, &e.ETAMS, &admitted)
		if at != nil {
			e.At = at.UTC()
		}
		if admitted != nil {
			e.AdmittedAt = admitted.UTC()
		}
		return e, err
	})
	return out, wrap("take entries", err)
}

func (t *txn) PutEntries(ctx context.Context, es []analytics.Entry) error {
	if len(es) == 0 {
		return nil
	}
	slices.SortFunc(es, func(a, b analytics.Entry) int {
		return cmp.Or(cmp.Compare(a.Room, b.Room), cmp.Compare(a.Visitor, b.Visitor))
	})
	n := len(es)
	rooms, visitors, eta := make([]string, n), make([]string, n), make([]int64, n)
	at, admitted, since := make([]*time.Time, n), make([]*time.Time, n), make([]time.Time, n)
	for i, e := range es {
		rooms[i], visitors[i], eta[i], since[i] = e.Room, e.Visitor, e.ETAMS, e.Since()
		at[i], admitted[i] = orNull(e.At), orNull(e.AdmittedAt)
	}
	_, err := t.tx.Exec(ctx, `INSERT INTO analytics_entries (room, visitor, at, eta_ms, admitted_at, since)
		SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::bigint[], $5::timestamptz[], $6::timestamptz[])
		ON CONFLICT (room, visitor) DO UPDATE SET at = excluded.at, eta_ms = excluded.eta_ms, admitted_at = excluded.admitted_at, since = excluded.since`,
		rooms, visitors, at, eta, admitted, since)
	return wrap("put entries", err)
}

func orNull(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// upsertMinute adds one row's counts, built from analytics.Counts.Columns.
var upsertMinute = func() string {
	var c analytics.Counts
	var names, marks, sets []string
	for i, col := range c.Columns() {
		names = append(names, col.Name)
		marks = append(marks, "$"+strconv.Itoa(i+3))
		sets = append(sets, col.Name+" = analytics_minutes."+col.Name+" + excluded."+col.Name)
	}
	return `INSERT INTO analytics_minutes (room, minute, ` + strings.Join(names, ", ") + `) VALUES ($1, $2, ` + strings.Join(marks, ", ") +
		`) ON CONFLICT (room, minute) DO UPDATE SET ` + strings.Join(sets, ", ")
}()

func (t *txn) AddMinutes(ctx context.Context, ms []analytics.Minute) error {
	slices.SortFunc(ms, func(a, b analytics.Minute) int {
		return cmp.Or(cmp.Compare(a.Room, b.Room), a.At.Compare(b.At))
	})
	var b pgx.Batch
	for _, m := range ms {
		args := []any{m.Room, m.At}
		for _, col := range m.Counts.Columns() {
			args = append(args, *col.P)
		}
		b.Queue(upsertMinute, args...)
		buckets := make([]int, 0, len(m.Wait))
		for k := range m.Wait {
			buckets = append(buckets, k)
		}
		slices.Sort(buckets)
		for _, k := range buckets {
			b.Queue(`INSERT INTO analytics_wait (room, minute, bucket, n) VALUES ($1, $2, $3, $4)
				ON CONFLICT (room, minute, bucket) DO UPDATE SET n = analytics_wait.n + excluded.n`, m.Room, m.At, k, m.Wait[k])
		}
	}
	return wrap("add minutes", t.tx.SendBatch(ctx, &b).Close())
}

func (t *txn) AddEvents(ctx context.Context, evs []event.Event, keep int) error {
	rooms, bodies := make([]string, len(evs)), make([]string, len(evs))
	touched := map[string]bool{}
	for i, e := range evs {
		body, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("pganalytics: add events: %w", err)
		}
		rooms[i], bodies[i] = e.Room, string(body)
		touched[e.Room] = true
	}
	var b pgx.Batch
	b.Queue(`INSERT INTO analytics_events (room, body) SELECT room, body FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t (room, body, n) ORDER BY n`, rooms, bodies)
	for _, room := range slices.Sorted(maps.Keys(touched)) {
		b.Queue(`DELETE FROM analytics_events WHERE room = $1 AND seq <=
			(SELECT seq FROM analytics_events WHERE room = $1 ORDER BY seq DESC OFFSET $2 LIMIT 1)`, room, keep)
	}
	return wrap("add events", t.tx.SendBatch(ctx, &b).Close())
}

// Minutes implements analytics.Store.
func (s *Store) Minutes(ctx context.Context, room string, from, to time.Time) ([]analytics.Minute, error) {
	var c analytics.Counts
	var names []string
	for _, col := range c.Columns() {
		names = append(names, col.Name)
	}
	rows, err := s.pool.Query(ctx, `SELECT minute, `+strings.Join(names, ", ")+` FROM analytics_minutes
		WHERE room = $1 AND minute >= $2 AND minute < $3 ORDER BY minute`, room, from, to)
	if err != nil {
		return nil, wrap("minutes", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (analytics.Minute, error) {
		m := analytics.Minute{Room: room, Wait: hist.Counts{}}
		dst := []any{&m.At}
		for _, col := range m.Counts.Columns() {
			dst = append(dst, col.P)
		}
		err := r.Scan(dst...)
		m.At = m.At.UTC()
		return m, err
	})
	if err != nil {
		return nil, wrap("minutes", err)
	}
	index := make(map[int64]int, len(out))
	for i, m := range out {
		index[m.At.Unix()] = i
	}
	hr, err := s.pool.Query(ctx, `SELECT minute, bucket, n FROM analytics_wait WHERE room = $1 AND minute >= $2 AND minute < $3`, room, from, to)
	if err != nil {
		return nil, wrap("minutes", err)
	}
	defer hr.Close()
	for hr.Next() {
		var at time.Time
		var b, n int64
		if err := hr.Scan(&at, &b, &n); err != nil {
			return nil, wrap("minutes", err)
		}
		if i, ok := index[at.Unix()]; ok {
			out[i].Wait[int(b)] += n
		}
	}
	return out, wrap("minutes", hr.Err())
}

// Events implements analytics.Store.
func (s *Store) Events(ctx context.Context, room string, before int64, limit int) ([]analytics.Stored, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, body FROM analytics_events WHERE room = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3`,
		room, before, limit)
	if err != nil {
		return nil, wrap("events", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (analytics.Stored, error) {
		var st analytics.Stored
		var body string
		if err := r.Scan(&st.Seq, &body); err != nil {
			return st, err
		}
		return st, json.Unmarshal([]byte(body), &st.Event)
	})
	return out, wrap("events", err)
}

// Prune implements analytics.Store.
func (s *Store) Prune(ctx context.Context, minutes, ids, entries time.Time) error {
	var b pgx.Batch
	b.Queue(`DELETE FROM analytics_minutes WHERE minute < $1`, minutes)
	b.Queue(`DELETE FROM analytics_wait WHERE minute < $1`, minutes)
	b.Queue(`DELETE FROM analytics_seen WHERE at < $1`, ids)
	b.Queue(`DELETE FROM analytics_entries WHERE since < $1`, entries)
	return wrap("prune", s.pool.SendBatch(ctx, &b).Close())
}

// wrap gives a database error its analytics sentinel; nil stays nil.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if unavailable(err) {
		return fmt.Errorf("pganalytics: %s: %w: %w", op, analytics.ErrUnavailable, err)
	}
	return fmt.Errorf("pganalytics: %s: %w", op, err)
}

// unavailable reports whether err means the server could not be reached or
// serve now (as pgbooking: connection, resources, shutdown, timeouts), or
// a conflict that a retry resolves (serialization failure, deadlock).
func unavailable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), strings.HasPrefix(pgErr.Code, "53"), strings.HasPrefix(pgErr.Code, "57P"),
			strings.HasPrefix(pgErr.Code, "40"), pgErr.Code == "58000", pgErr.Code == "58030":
			return true
		}
		return false
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || pgconn.Timeout(err)
}
