// Package sqliteanalytics is the analytics.Store in one SQLite file, for the
// embedded defaults.
//
// The file is its own, not the booking database's (usher serve puts it at
// <data-dir>/analytics.db): SQLite has one writer per file, and analytics
// writes in sqlitebooking's file would queue every reservation decision
// behind the collector's transactions during a rush. Nothing needs a
// transaction across the two (the analytics hold only counts).
//
// Limits: one writer connection (each Update is one BEGIN IMMEDIATE
// transaction with synchronous=FULL: the collector acknowledges a batch after
// its commit); another process on the file contends through the busy
// timeout.
package sqliteanalytics

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"usher/internal/analytics"
	"usher/internal/event"
	"usher/internal/hist"
	"usher/internal/sqlitedb"
	"usher/internal/sqlmigrate"
)

var _ analytics.Store = (*Store)(nil)

//go:embed migrations/*.sql
var migrations embed.FS

// readers is the size of the query-only pool (analytics reads are the API's).
const readers = 2

// Store is an analytics.Store on one SQLite file.
type Store struct {
	w, r *sql.DB
}

// Open opens (creating if needed) the file at path and its directory, and
// applies the embedded migrations (recorded in analytics_migrations). Like
// sqlitebooking: WAL mode, one writer connection, a small pool of read-only
// connections, a busy timeout for other processes on the same file. Minutes
// are stored as unix seconds, entries' times as unix nanoseconds, timeline
// events as their JSON.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" || path == ":memory:" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqliteanalytics: open %q: want a file path without '?' or '#': %w", path, analytics.ErrInvalid)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("sqliteanalytics: open %s: %w: %w", path, analytics.ErrUnavailable, err)
	}
	w, r, err := sqlitedb.Open(ctx, path, readers, migrate)
	if err != nil {
		return nil, wrap("open "+path, err)
	}
	return &Store{w: w, r: r}, nil
}

// Close closes both pools.
func (s *Store) Close() error { return errors.Join(s.r.Close(), s.w.Close()) }

func migrate(ctx context.Context, db *sql.DB) error {
	return sqlmigrate.SQLite(ctx, db, migrations, "migrations", "analytics_migrations")
}

// Update implements analytics.Store.
func (s *Store) Update(ctx context.Context, fn func(context.Context, analytics.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return wrap("update", err)
	}
	defer tx.Rollback()
	if err := fn(ctx, &txn{tx}); err != nil {
		return err
	}
	return wrap("update: commit", tx.Commit())
}

type txn struct{ tx *sql.Tx }

func (t *txn) Claim(ctx context.Context, ids []string, at []time.Time) (map[string]bool, error) {
	st, err := t.tx.PrepareContext(ctx, `INSERT INTO analytics_seen (id, at) VALUES (?, ?) ON CONFLICT DO NOTHING`)
	if err != nil {
		return nil, wrap("claim", err)
	}
	defer st.Close()
	out := make(map[string]bool, len(ids))
	for i, id := range ids {
		res, err := st.ExecContext(ctx, id, at[i].Unix())
		if err != nil {
			return nil, wrap("claim", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			out[id] = true
		}
	}
	return out, nil
}

func (t *txn) TakeEntries(ctx context.Context, vs []analytics.Visit) ([]analytics.Entry, error) {
	st, err := t.tx.PrepareContext(ctx, `DELETE FROM analytics_entries WHERE room = ? AND visitor = ? RETURNING at, eta_ms, admitted_at`)
	if err != nil {
		return nil, wrap("take entries", err)
	}
	defer st.Close()
	var out []analytics.Entry
	for _, v := range vs {
		var at, eta, admitted int64
		err := st.QueryRowContext(ctx, v.Room, v.Visitor).Scan(&at, &eta, &admitted)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, wrap("take entries", err)
		}
		out = append(out, analytics.Entry{Room: v.Room, Visitor: v.Visitor, At: fromNanos(at), ETAMS: eta, AdmittedAt: fromNanos(admitted)})
	}
	return out, nil
}

func (t *txn) PutEntries(ctx context.Context, es []analytics.Entry) error {
	if len(es) == 0 {
		return nil
	}
	st, err := t.tx.PrepareContext(ctx, `INSERT INTO analytics_entries (room, visitor, at, eta_ms, admitted_at, since) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (room, visitor) DO UPDATE SET at = excluded.at, eta_ms = excluded.eta_ms, admitted_at = excluded.admitted_at, since = excluded.since`)
	if err != nil {
		return wrap("put entries", err)
	}
	defer st.Close()
	for _, e := range es {
		if _, err := st.ExecContext(ctx, e.Room, e.Visitor, nanos(e.At), e.ETAMS, nanos(e.AdmittedAt), nanos(e.Since())); err != nil {
			return wrap("put entries", err)
		}
	}
	return nil
}

// nanos and fromNanos store a time as unix nanoseconds, the zero time as 0.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// upsertMinute is the statement that adds one row's counts, built from
// analytics.Counts.Columns.
var upsertMinute = func() string {
	var c analytics.Counts
	var names, marks, sets []string
	for _, col := range c.Columns() {
		names = append(names, col.Name)
		marks = append(marks, "?")
		sets = append(sets, col.Name+" = "+col.Name+" + excluded."+col.Name)
	}
	return `INSERT INTO analytics_minutes (room, minute, ` + strings.Join(names, ", ") + `) VALUES (?, ?, ` + strings.Join(marks, ", ") +
		`) ON CONFLICT (room, minute) DO UPDATE SET ` + strings.Join(sets, ", ")
}()

func (t *txn) AddMinutes(ctx context.Context, ms []analytics.Minute) error {
	st, err := t.tx.PrepareContext(ctx, upsertMinute)
	if err != nil {
		return wrap("add minutes", err)
	}
	defer st.Close()
	hs, err := t.tx.PrepareContext(ctx, `INSERT INTO analytics_wait (room, minute, bucket, n) VALUES (?, ?, ?, ?)
		ON CONFLICT (room, minute, bucket) DO UPDATE SET n = n + excluded.n`)
	if err != nil {
		return wrap("add minutes", err)
	}
	defer hs.Close()
	for _, m := range ms {
		args := []any{m.Room, m.At.Unix()}
		for _, col := range m.Counts.Columns() {
			args = append(args, *col.P)
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return wrap("add minutes", err)
		}
		for b, n := range m.Wait {
			if _, err := hs.ExecContext(ctx, m.Room, m.At.Unix(), b, n); err != nil {
				return wrap("add minutes", err)
			}
		}
	}
	return nil
}

func (t *txn) AddEvents(ctx context.Context, evs []event.Event, keep int) error {
	st, err := t.tx.PrepareContext(ctx, `INSERT INTO analytics_events (room, body) VALUES (?, ?)`)
	if err != nil {
		return wrap("add events", err)
	}
	defer st.Close()
	rooms := map[string]bool{}
	for _, e := range evs {
		body, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("sqliteanalytics: add events: %w", err)
		}
		if _, err := st.ExecContext(ctx, e.Room, body); err != nil {
			return wrap("add events", err)
		}
		rooms[e.Room] = true
	}
	for room := range rooms {
		if _, err := t.tx.ExecContext(ctx, `DELETE FROM analytics_events WHERE room = ?1 AND seq <=
			(SELECT seq FROM analytics_events WHERE room = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)`, room, keep); err != nil {
			return wrap("add events: trim", err)
		}
	}
	return nil
}

// Minutes implements analytics.Store.
func (s *Store) Minutes(ctx context.Context, room string, from, to time.Time) ([]analytics.Minute, error) {
	var c analytics.Counts
	var names []string
	for _, col := range c.Columns() {
		names = append(names, col.Name)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT minute, `+strings.Join(names, ", ")+` FROM analytics_minutes
		WHERE room = ? AND minute >= ? AND minute < ? ORDER BY minute`, room, from.Unix(), to.Unix())
	if err != nil {
		return nil, wrap("minutes", err)
	}
	defer rows.Close()
	var out []analytics.Minute
	index := map[int64]int{}
	for rows.Next() {
		m := analytics.Minute{Room: room, Wait: hist.Counts{}}
		var at int64
		dst := []any{&at}
		for _, col := range m.Counts.Columns() {
			dst = append(dst, col.P)
		}
		if err := rows.Scan(dst...); err != nil {
			return nil, wrap("minutes", err)
		}
		m.At = time.Unix(at, 0).UTC()
		index[at] = len(out)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("minutes", err)
	}
	hr, err := s.r.QueryContext(ctx, `SELECT minute, bucket, n FROM analytics_wait WHERE room = ? AND minute >= ? AND minute < ?`,
		room, from.Unix(), to.Unix())
	if err != nil {
		return nil, wrap("minutes", err)
	}
	defer hr.Close()
	for hr.Next() {
		var at, n int64
		var b int
		if err := hr.Scan(&at, &b, &n); err != nil {
			return nil, wrap("minutes", err)
		}
		if i, ok := index[at]; ok {
			out[i].Wait[b] += n
		}
	}
	return out, wrap("minutes", hr.Err())
}

// Events implements analytics.Store.
func (s *Store) Events(ctx context.Context, room string, before int64, limit int) ([]analytics.Stored, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := s.r.QueryContext(ctx, `SELECT seq, body FROM analytics_events WHERE room = ? AND seq < ? ORDER BY seq DESC LIMIT ?`,
		room, before, limit)
	if err != nil {
		return nil, wrap("events", err)
	}
	defer rows.Close()
	var out []analytics.Stored
	for rows.Next() {
		var st analytics.Stored
		var body []byte
		if err := rows.Scan(&st.Seq, &body); err != nil {
			return nil, wrap("events", err)
		}
		if err := json.Unmarshal(body, &st.Event); err != nil {
			return nil, fmt.Errorf("sqliteanalytics: events: %w", err)
		}
		out = append(out, st)
	}
	return out, wrap("events", rows.Err())
}

// Prune implements analytics.Store.
func (s *Store) Prune(ctx context.Context, minutes, ids, entries time.Time) error {
	for _, q := range []struct {
		sql string
		arg int64
	}{
		{`DELETE FROM analytics_minutes WHERE minute < ?`, minutes.Unix()},
		{`DELETE FROM analytics_wait WHERE minute < ?`, minutes.Unix()},
		{`DELETE FROM analytics_seen WHERE at < ?`, ids.Unix()},
		{`DELETE FROM analytics_entries WHERE since < ?`, entries.UnixNano()},
	} {
		if _, err := s.w.ExecContext(ctx, q.sql, q.arg); err != nil {
			return wrap("prune", err)
		}
	}
	return nil
}

// wrap gives a database error its analytics sentinel; nil stays nil.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var sqErr *sqlite.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, sql.ErrConnDone):
		return fmt.Errorf("sqliteanalytics: %s: %w: %w", op, analytics.ErrUnavailable, err)
	case errors.As(err, &sqErr):
		switch sqErr.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN,
			sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_NOTADB,
			sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_INTERRUPT:
			return fmt.Errorf("sqliteanalytics: %s: %w: %w", op, analytics.ErrUnavailable, err)
		}
	}
	return fmt.Errorf("sqliteanalytics: %s: %w", op, err)
}
