// Package mysqlanalytics is the analytics.Store on MySQL 8.0 or MariaDB
// 10.6 and later (InnoDB, github.com/go-sql-driver/mysql).
//
// Its tables live in the booking database, beside mysqlbooking's (the same
// --db URL), with their own migrations table (analytics_migrations) and
// their own migration lock. Each Update is one READ COMMITTED transaction
// of a few round trips: IDs are claimed with one multi-row INSERT … ON
// DUPLICATE KEY UPDATE carrying a per-transaction token, read back by that
// token (MySQL has no RETURNING); entries are taken with SELECT … FOR
// UPDATE then DELETE; counts are added with multi-row upserts. Rows are
// written in a fixed order (sorted), so two collectors on one database wait
// for each other rather than deadlock; a deadlock or lock timeout that
// still happens wraps analytics.ErrUnavailable (the collector retries), as
// does any failure to reach the server.
package mysqlanalytics

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"usher/internal/analytics"
	"usher/internal/event"
	"usher/internal/hist"
	"usher/internal/mysqldb"
	"usher/internal/sqlmigrate"
)

var _ analytics.Store = (*Store)(nil)

//go:embed migrations/*.sql
var migrations embed.FS

const (
	migrationLock = "usher_analytics_migrate"
	// chunk is how many rows one multi-row statement carries (at most 21
	// placeholders a row: far below the 65,535 of a prepared statement).
	chunk = 500
)

// Store is an analytics.Store on a MySQL connection pool.
type Store struct{ db *sql.DB }

// Open connects with at most poolSize connections and applies the embedded
// migrations once, under a named lock. url is mysql://user:pass@host:port/db
// (see mysqlbooking.Open).
func Open(ctx context.Context, url string, poolSize int) (*Store, error) {
	if poolSize < 1 {
		return nil, fmt.Errorf("mysqlanalytics: open: pool size %d: %w", poolSize, analytics.ErrInvalid)
	}
	mig, err := mysqldb.Open(ctx, url, 1, true, analytics.ErrInvalid, analytics.ErrUnavailable)
	if err != nil {
		return nil, fmt.Errorf("mysqlanalytics: open: %w", err)
	}
	err = sqlmigrate.MySQL(ctx, mig, migrations, "migrations", "analytics_migrations", migrationLock)
	mig.Close()
	if err != nil {
		return nil, wrap("open: migrate", err)
	}
	db, err := mysqldb.Open(ctx, url, poolSize, false, analytics.ErrInvalid, analytics.ErrUnavailable)
	if err != nil {
		return nil, fmt.Errorf("mysqlanalytics: open: %w", err)
	}
	return &Store{db: db}, nil
}

// Close closes the pool.
func (s *Store) Close() error { return s.db.Close() }

// Update implements analytics.Store.
func (s *Store) Update(ctx context.Context, fn func(context.Context, analytics.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return wrap("update", err)
	}
	defer tx.Rollback()
	if err := fn(ctx, &txn{tx: tx}); err != nil {
		return err
	}
	return wrap("update: commit", tx.Commit())
}

type txn struct {
	tx    *sql.Tx
	token []byte // this transaction's claim token, drawn at the first Claim
}

// Claim inserts the ids not yet recorded with this transaction's token
// (ON DUPLICATE KEY UPDATE leaves a recorded id as it was) and returns
// those that carry it. A concurrent transaction inserting the same id
// waits for this one to end, then finds it recorded.
func (t *txn) Claim(ctx context.Context, ids []string, at []time.Time) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	if t.token == nil {
		t.token = make([]byte, 16)
		rand.Read(t.token)
	}
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(ids[a], ids[b]) })
	for start := 0; start < len(order); start += chunk {
		part := order[start:min(start+chunk, len(order))]
		args := make([]any, 0, 3*len(part))
		keys := make([]any, 0, len(part))
		for _, i := range part {
			args = append(args, []byte(ids[i]), at[i].UTC(), t.token)
			keys = append(keys, []byte(ids[i]))
		}
		if _, err := t.tx.ExecContext(ctx, `INSERT INTO analytics_seen (id, at, claim) VALUES `+
			marks(len(part), "(?, ?, ?)")+` ON DUPLICATE KEY UPDATE id = id`, args...); err != nil {
			return nil, wrap("claim", err)
		}
		rows, err := t.tx.QueryContext(ctx, `SELECT id FROM analytics_seen WHERE claim = ? AND id IN (`+marks(len(keys), "?")+`)`,
			append([]any{t.token}, keys...)...)
		if err != nil {
			return nil, wrap("claim", err)
		}
		err = each(rows, func(rows *sql.Rows) error {
			var id []byte
			err := rows.Scan(&id)
			out[string(id)] = true
			return err
		})
		if err != nil {
			return nil, wrap("claim", err)
		}
	}
	return out, nil
}

// TakeEntries locks the entries of vs (in key order), reads them and
// deletes them: MySQL has no DELETE … RETURNING.
func (t *txn) TakeEntries(ctx context.Context, vs []analytics.Visit) ([]analytics.Entry, error) {
	slices.SortFunc(vs, func(a, b analytics.Visit) int {
		return cmp.Or(cmp.Compare(a.Room, b.Room), cmp.Compare(a.Visitor, b.Visitor))
	})
	var out []analytics.Entry
	for start := 0; start < len(vs); start += chunk {
		part := vs[start:min(start+chunk, len(vs))]
		args := make([]any, 0, 2*len(part))
		for _, v := range part {
			args = append(args, v.Room, v.Visitor)
		}
		where := ` WHERE (room, visitor) IN (` + marks(len(part), "(?, ?)") + `)`
		rows, err := t.tx.QueryContext(ctx, `SELECT room, visitor, at, eta_ms, admitted_at FROM analytics_entries`+where+
			` ORDER BY room, visitor FOR UPDATE`, args...)
		if err != nil {
			return nil, wrap("take entries", err)
		}
		err = each(rows, func(rows *sql.Rows) error {
			var e analytics.Entry
			var at, admitted sql.NullTime
			err := rows.Scan(&e.Room, &e.Visitor, &at, &e.ETAMS, &admitted)
			e.At, e.AdmittedAt = at.Time, admitted.Time
			out = append(out, e)
			return err
		})
		if err != nil {
			return nil, wrap("take entries", err)
		}
		if _, err := t.tx.ExecContext(ctx, `DELETE FROM analytics_entries`+where, args...); err != nil {
			return nil, wrap("take entries", err)
		}
	}
	return out, nil
}

// PutEntries upserts entries in key order.
func (t *txn) PutEntries(ctx context.Context, es []analytics.Entry) error {
	slices.SortFunc(es, func(a, b analytics.Entry) int {
		return cmp.Or(cmp.Compare(a.Room, b.Room), cmp.Compare(a.Visitor, b.Visitor))
	})
	for start := 0; start < len(es); start += chunk {
		part := es[start:min(start+chunk, len(es))]
		args := make([]any, 0, 6*len(part))
		for _, e := range part {
			args = append(args, e.Room, e.Visitor, orNull(e.At), e.ETAMS, orNull(e.AdmittedAt), e.Since().UTC())
		}
		_, err := t.tx.ExecContext(ctx, `INSERT INTO analytics_entries (room, visitor, at, eta_ms, admitted_at, since) VALUES `+
			marks(len(part), "(?, ?, ?, ?, ?, ?)")+` ON DUPLICATE KEY UPDATE
			at = VALUES(at), eta_ms = VALUES(eta_ms), admitted_at = VALUES(admitted_at), since = VALUES(since)`, args...)
		if err != nil {
			return wrap("put entries", err)
		}
	}
	return nil
}

// orNull is t, or NULL for the zero time.
func orNull(t time.Time) sql.NullTime {
	return sql.NullTime{Time: t.UTC(), Valid: !t.IsZero()}
}

// minuteColumns, minuteRow and minuteAdd are the parts of the upsert that
// adds minute rows, built from analytics.Counts.Columns. VALUES(col) names
// the value the row would have inserted: MariaDB's spelling, which MySQL
// 8.0 still accepts (it prefers an alias, which MariaDB lacks).
var minuteColumns, minuteRow, minuteAdd = func() (string, string, string) {
	var c analytics.Counts
	var names, qs, sets []string
	for _, col := range c.Columns() {
		names = append(names, col.Name)
		qs = append(qs, "?")
		sets = append(sets, col.Name+" = "+col.Name+" + VALUES("+col.Name+")")
	}
	return strings.Join(names, ", "), "(?, ?, " + strings.Join(qs, ", ") + ")", strings.Join(sets, ", ")
}()

// AddMinutes adds the rows in (room, minute) order, then their histogram
// buckets in (room, minute, bucket) order, with multi-row upserts.
func (t *txn) AddMinutes(ctx context.Context, ms []analytics.Minute) error {
	slices.SortFunc(ms, func(a, b analytics.Minute) int {
		return cmp.Or(cmp.Compare(a.Room, b.Room), a.At.Compare(b.At))
	})
	type bucket struct {
		room string
		at   time.Time
		b    int
		n    int64
	}
	var buckets []bucket
	for start := 0; start < len(ms); start += chunk {
		part := ms[start:min(start+chunk, len(ms))]
		var args []any
		for _, m := range part {
			args = append(args, m.Room, m.At.UTC())
			for _, col := range m.Counts.Columns() {
				args = append(args, *col.P)
			}
			for _, b := range slices.Sorted(maps.Keys(m.Wait)) {
				buckets = append(buckets, bucket{m.Room, m.At.UTC(), b, m.Wait[b]})
			}
		}
		if _, err := t.tx.ExecContext(ctx, `INSERT INTO analytics_minutes (room, minute, `+minuteColumns+`) VALUES `+
			marks(len(part), minuteRow)+` ON DUPLICATE KEY UPDATE `+minuteAdd, args...); err != nil {
			return wrap("add minutes", err)
		}
	}
	for start := 0; start < len(buckets); start += chunk {
		part := buckets[start:min(start+chunk, len(buckets))]
		args := make([]any, 0, 4*len(part))
		for _, b := range part {
			args = append(args, b.room, b.at, b.b, b.n)
		}
		if _, err := t.tx.ExecContext(ctx, `INSERT INTO analytics_wait (room, minute, bucket, n) VALUES `+
			marks(len(part), "(?, ?, ?, ?)")+` ON DUPLICATE KEY UPDATE n = n + VALUES(n)`, args...); err != nil {
			return wrap("add minutes", err)
		}
	}
	return nil
}

// AddEvents appends the events in order (multi-row INSERTs: ascending seq),
// then trims each room it touched: the keep-th newest seq is read first,
// since MySQL refuses a DELETE whose subquery reads the same table.
func (t *txn) AddEvents(ctx context.Context, evs []event.Event, keep int) error {
	touched := map[string]bool{}
	for start := 0; start < len(evs); start += chunk {
		part := evs[start:min(start+chunk, len(evs))]
		args := make([]any, 0, 2*len(part))
		for _, e := range part {
			body, err := json.Marshal(e)
			if err != nil {
				return fmt.Errorf("mysqlanalytics: add events: %w", err)
			}
			args = append(args, e.Room, string(body))
			touched[e.Room] = true
		}
		if _, err := t.tx.ExecContext(ctx, `INSERT INTO analytics_events (room, body) VALUES `+marks(len(part), "(?, ?)"), args...); err != nil {
			return wrap("add events", err)
		}
	}
	for _, room := range slices.Sorted(maps.Keys(touched)) {
		var cut int64
		err := t.tx.QueryRowContext(ctx, `SELECT seq FROM analytics_events WHERE room = ? ORDER BY seq DESC LIMIT 1 OFFSET ?`,
			room, keep).Scan(&cut)
		if errors.Is(err, sql.ErrNoRows) {
			continue // keep or fewer
		}
		if err != nil {
			return wrap("add events: trim", err)
		}
		if _, err := t.tx.ExecContext(ctx, `DELETE FROM analytics_events WHERE room = ? AND seq <= ?`, room, cut); err != nil {
			return wrap("add events: trim", err)
		}
	}
	return nil
}

// Minutes implements analytics.Store.
func (s *Store) Minutes(ctx context.Context, room string, from, to time.Time) ([]analytics.Minute, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT minute, `+minuteColumns+` FROM analytics_minutes
		WHERE room = ? AND minute >= ? AND minute < ? ORDER BY minute`, room, from.UTC(), to.UTC())
	if err != nil {
		return nil, wrap("minutes", err)
	}
	var out []analytics.Minute
	index := map[int64]int{}
	err = each(rows, func(rows *sql.Rows) error {
		m := analytics.Minute{Room: room, Wait: hist.Counts{}}
		dst := []any{&m.At}
		for _, col := range m.Counts.Columns() {
			dst = append(dst, col.P)
		}
		if err := rows.Scan(dst...); err != nil {
			return err
		}
		index[m.At.UnixMicro()] = len(out)
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, wrap("minutes", err)
	}
	hr, err := s.db.QueryContext(ctx, `SELECT minute, bucket, n FROM analytics_wait WHERE room = ? AND minute >= ? AND minute < ?`,
		room, from.UTC(), to.UTC())
	if err != nil {
		return nil, wrap("minutes", err)
	}
	err = each(hr, func(rows *sql.Rows) error {
		var at time.Time
		var b int
		var n int64
		if err := rows.Scan(&at, &b, &n); err != nil {
			return err
		}
		if i, ok := index[at.UnixMicro()]; ok {
			out[i].Wait[b] += n
		}
		return nil
	})
	return out, wrap("minutes", err)
}

// Events implements analytics.Store.
func (s *Store) Events(ctx context.Context, room string, before int64, limit int) ([]analytics.Stored, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := s.db.QueryContext(ctx, `SELECT seq, body FROM analytics_events WHERE room = ? AND seq < ? ORDER BY seq DESC LIMIT ?`,
		room, before, limit)
	if err != nil {
		return nil, wrap("events", err)
	}
	var out []analytics.Stored
	err = each(rows, func(rows *sql.Rows) error {
		var st analytics.Stored
		var body []byte
		if err := rows.Scan(&st.Seq, &body); err != nil {
			return err
		}
		if err := json.Unmarshal(body, &st.Event); err != nil {
			return fmt.Errorf("event %d: %w", st.Seq, err)
		}
		out = append(out, st)
		return nil
	})
	return out, wrap("events", err)
}

// Prune implements analytics.Store.
func (s *Store) Prune(ctx context.Context, minutes, ids, entries time.Time) error {
	for _, q := range []struct {
		sql string
		arg time.Time
	}{
		{`DELETE FROM analytics_minutes WHERE minute < ?`, minutes},
		{`DELETE FROM analytics_wait WHERE minute < ?`, minutes},
		{`DELETE FROM analytics_seen WHERE at < ?`, ids},
		{`DELETE FROM analytics_entries WHERE since < ?`, entries},
	} {
		if _, err := s.db.ExecContext(ctx, q.sql, q.arg.UTC()); err != nil {
			return wrap("prune", err)
		}
	}
	return nil
}

// marks returns n copies of group joined by commas.
func marks(n int, group string) string {
	return strings.TrimSuffix(strings.Repeat(group+",", n), ",")
}

// each calls f for every row, then closes rows.
func each(rows *sql.Rows, f func(*sql.Rows) error) error {
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// wrap gives a database error its analytics sentinel; nil stays nil. A
// deadlock is unavailable too: the collector retries the batch.
func wrap(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, analytics.ErrUnavailable), errors.Is(err, analytics.ErrInvalid):
		return fmt.Errorf("mysqlanalytics: %s: %w", op, err)
	case mysqldb.Unavailable(err), mysqldb.Code(err) == mysqldb.ErDeadlock, mysqldb.Code(err) == mysqldb.ErAutoIncRead:
		return fmt.Errorf("mysqlanalytics: %s: %w: %w", op, analytics.ErrUnavailable, err)
	}
	return fmt.Errorf("mysqlanalytics: %s: %w", op, err)
}
