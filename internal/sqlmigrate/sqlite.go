package sqlmigrate

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"time"
)

// SQLite applies every migration in dir of fsys that table does not record
// yet, in one transaction on db. On usher's SQLite files db is the one
// writer in immediate-transaction mode (sqlitedb), so concurrent Opens of a
// file apply each migration once. table (a trusted identifier, not input)
// is created if missing; applied_at is in Unix microseconds.
func SQLite(ctx context.Context, db *sql.DB, fsys fs.FS, dir, table string) error {
	files, err := Read(fsys, dir)
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
		version    INTEGER PRIMARY KEY,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("%s: %w", table, err)
	}
	for _, m := range files {
		var applied bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+` WHERE version = ?)`, m.Version).Scan(&applied); err != nil {
			return err
		}
		if applied {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+table+` (version, applied_at) VALUES (?, ?)`, m.Version, time.Now().UnixMicro()); err != nil {
			return err
		}
	}
	return tx.Commit()
}
