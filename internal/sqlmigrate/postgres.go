package sqlmigrate

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Postgres applies every migration in dir of fsys that table does not
// record yet, in one transaction that holds the advisory lock key lock, so
// that instances starting together migrate once. table (a trusted
// identifier, not input) is created if missing.
func Postgres(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS, dir, table string, lock int64) error {
	files, err := Read(fsys, dir)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
			version    INT         PRIMARY KEY,
			applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
		)`); err != nil {
			return err
		}
		for _, m := range files {
			var applied bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+` WHERE version = $1)`, m.Version).Scan(&applied); err != nil {
				return err
			}
			if applied {
				continue
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+table+` (version) VALUES ($1)`, m.Version); err != nil {
				return err
			}
		}
		return nil
	})
}
