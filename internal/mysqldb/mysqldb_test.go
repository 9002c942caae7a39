package mysqldb_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"usher/internal/mysqldb"
	"usher/internal/testenv"
)

func TestConfig(t *testing.T) {
	for _, tt := range []struct {
		url, user, pass, addr, db string
		timeout                   time.Duration
	}{
		{"mysql://root@127.0.0.1:3306/test", "root", "", "127.0.0.1:3306", "test", 0},
		{"mysql://u:p%40ss%3Aw@db.example/usher?timeout=2s", "u", "p@ss:w", "db.example:3306", "usher", 2 * time.Second},
		{"mysql://u@[::1]:3307/x", "u", "", "[::1]:3307", "x", 0},
	} {
		cfg, err := mysqldb.Config(tt.url)
		if err != nil {
			t.Errorf("Config(%q): %v", tt.url, err)
			continue
		}
		if cfg.User != tt.user || cfg.Passwd != tt.pass || cfg.Addr != tt.addr || cfg.DBName != tt.db || cfg.Timeout != tt.timeout {
			t.Errorf("Config(%q) = user %q pass %q addr %q db %q timeout %v; want %q %q %q %q %v", tt.url,
				cfg.User, cfg.Passwd, cfg.Addr, cfg.DBName, cfg.Timeout, tt.user, tt.pass, tt.addr, tt.db, tt.timeout)
		}
		if !cfg.ParseTime || cfg.Loc != time.UTC || !cfg.ClientFoundRows || !cfg.InterpolateParams {
			t.Errorf("Config(%q): parseTime, loc UTC, clientFoundRows, interpolateParams not all set", tt.url)
		}
	}
	for _, bad := range []string{
		"postgres://u@h/db", "mysql://u@h", "mysql://u@h/", "mysql:///db", "mysql://u@h:1/db?timeout=soon", "::",
	} {
		if _, err := mysqldb.Config(bad); err == nil {
			t.Errorf("Config(%q) succeeded, want an error", bad)
		}
	}
}

// TestOpenUnavailable: a closed port fails Open with the caller's
// unavailable error, promptly.
func TestOpenUnavailable(t *testing.T) {
	invalid, unavailable := errors.New("invalid"), errors.New("unavailable")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := mysqldb.Open(ctx, "mysql://u@"+testenv.ClosedAddr(t)+"/db?timeout=2s", 1, false, invalid, unavailable)
	if !errors.Is(err, unavailable) || !mysqldb.Unavailable(err) {
		t.Errorf("Open on a closed port: %v, want unavailable", err)
	}
	if _, err := mysqldb.Open(ctx, "mysql://u@h/db", 0, false, invalid, unavailable); !errors.Is(err, invalid) {
		t.Errorf("Open with pool size 0: %v, want invalid", err)
	}
}
