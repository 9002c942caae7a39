// Package sqlitedb opens the SQLite files of usher's embedded stores
// (sqlitebooking, sqliteanalytics) the one way they share: one writer
// connection in WAL mode with synchronous=FULL and immediate transactions
// (SQLite has one writer per file), and a pool of query-only readers.
package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// BusyTimeout is how long a connection waits for another's lock, and how
// long Open retries migrate while another process holds a new file.
const BusyTimeout = 10 * time.Second

// Open opens the writer and readers pools of the file at path (which the
// caller validated), each connection with busy_timeout and pragmas, and runs
// migrate on the writer: again while another process holds the new file
// busy (SQLITE_BUSY while it turns it to WAL mode), for up to BusyTimeout.
// On error nothing stays open.
func Open(ctx context.Context, path string, readers int, migrate func(context.Context, *sql.DB) error, pragmas ...string) (w, r *sql.DB, err error) {
	dsn := func(extra ...string) string {
		q := url.Values{}
		q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
		for _, p := range append(pragmas[:len(pragmas):len(pragmas)], extra...) {
			q.Add("_pragma", p)
		}
		return "file:" + path + "?" + q.Encode()
	}
	if w, err = sql.Open("sqlite", dsn("journal_mode(WAL)", "synchronous(FULL)")+"&_txlock=immediate"); err != nil {
		return nil, nil, err
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := migrateRetrying(ctx, w, migrate); err != nil {
		w.Close()
		return nil, nil, err
	}
	if r, err = sql.Open("sqlite", dsn("query_only(1)")); err != nil {
		w.Close()
		return nil, nil, err
	}
	r.SetMaxOpenConns(readers)
	r.SetMaxIdleConns(readers)
	return w, r, nil
}

func migrateRetrying(ctx context.Context, w *sql.DB, migrate func(context.Context, *sql.DB) error) error {
	deadline := time.Now().Add(BusyTimeout)
	for {
		err := migrate(ctx, w)
		var sqErr *sqlite.Error
		if err == nil || !errors.As(err, &sqErr) || sqErr.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}
