package sqlmigrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
)

// MySQL applies every migration in dir of fsys that table does not record
// yet, on one connection of db (which must allow several statements per
// Exec) holding the named lock lock (GET_LOCK, server-wide), so that
// instances starting together migrate once. table (a trusted identifier,
// not input) is created if missing.
//
// MySQL and MariaDB commit every DDL statement at once: a migration that
// fails halfway leaves its earlier statements applied and is not recorded,
// so each migration file must be one statement or safe to run again.
func MySQL(ctx context.Context, db *sql.DB, fsys fs.FS, dir, table, lock string) (err error) {
	files, err := Read(fsys, dir)
	if err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(?, 60)`, lock).Scan(&got); err != nil {
		return err
	}
	if got.Int64 != 1 {
		return fmt.Errorf("lock %s: not granted within 60 s", lock)
	}
	defer func() {
		_, unlockErr := conn.ExecContext(context.WithoutCancel(ctx), `SELECT RELEASE_LOCK(?)`, lock)
		err = errors.Join(err, unlockErr)
	}()
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
		version    INT         NOT NULL PRIMARY KEY,
		applied_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
	) ENGINE = InnoDB`); err != nil {
		return err
	}
	for _, m := range files {
		var applied bool
		if err := conn.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+` WHERE version = ?)`, m.Version).Scan(&applied); err != nil {
			return err
		}
		if applied {
			continue
		}
		if err := execAll(ctx, conn, m.SQL); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO `+table+` (version) VALUES (?)`, m.Version); err != nil {
			return err
		}
	}
	return nil
}

// execAll runs a multi-statement text and reads every result, so that an
// error in a later statement is not lost.
func execAll(ctx context.Context, conn *sql.Conn, text string) error {
	rows, err := conn.QueryContext(ctx, text)
	if err != nil {
		return err
	}
	for {
		for rows.Next() {
		}
		if !rows.NextResultSet() {
			break
		}
	}
	return errors.Join(rows.Err(), rows.Close())
}
