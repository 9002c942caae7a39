package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresSchema creates a schema no other test uses, dropped when the test
// ends, and returns a URL whose search_path is that schema. A set but
// unreachable server fails the test: it never skips.
func PostgresSchema(tb testing.TB) string {
	tb.Helper()
	base := URL(tb, "USHER_TEST_POSTGRES")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		tb.Fatalf("USHER_TEST_POSTGRES is set but PostgreSQL does not answer: %v", err)
	}
	defer conn.Close(ctx)
	b := make([]byte, 8)
	rand.Read(b)
	schema := "usher_test_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("create schema: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return WithParam(tb, base, "search_path", schema)
}

// WithParam sets a connection parameter in a URL or key=value DSN.
func WithParam(tb testing.TB, dsn, key, value string) string {
	tb.Helper()
	if !strings.Contains(dsn, "://") {
		return dsn + " " + key + "=" + value
	}
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatalf("USHER_TEST_POSTGRES: %v", err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}
