package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MySQLDatabase creates a database no other test uses on the server of
// USHER_TEST_MYSQL (mysql://user:pass@host:port/db), dropped when the test
// ends, and returns the URL with that database. A set but unreachable
// server fails the test: it never skips.
func MySQLDatabase(tb testing.TB) string {
	tb.Helper()
	base := URL(tb, "USHER_TEST_MYSQL")
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "mysql" || u.Host == "" {
		tb.Fatalf("USHER_TEST_MYSQL: want mysql://user@host:port/db, got %q", base)
	}
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr = "tcp", u.Host
	if u.Port() == "" {
		cfg.Addr += ":3306"
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.Timeout = 10 * time.Second
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		tb.Fatalf("USHER_TEST_MYSQL: %v", err)
	}
	db := sql.OpenDB(connector)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := make([]byte, 8)
	rand.Read(b)
	name := "usher_test_" + hex.EncodeToString(b)
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4"); err != nil {
		db.Close()
		tb.Fatalf("USHER_TEST_MYSQL is set but MySQL does not answer (create database): %v", err)
	}
	tb.Cleanup(func() {
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE "+name); err != nil {
			tb.Errorf("drop database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}
