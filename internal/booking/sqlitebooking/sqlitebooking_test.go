package sqlitebooking_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"usher/internal/booking"
	"usher/internal/booking/bookingtest"
	"usher/internal/booking/sqlitebooking"
)

func open(tb testing.TB, path string) *sqlitebooking.Store {
	tb.Helper()
	s, err := sqlitebooking.Open(context.Background(), path)
	if err != nil {
		tb.Fatalf("Open(%s): %v", path, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

func newStore(tb testing.TB) booking.Store {
	return open(tb, filepath.Join(tb.TempDir(), "booking.db"))
}

func TestConformance(t *testing.T) { bookingtest.Run(t, newStore) }

func BenchmarkStore(b *testing.B) { bookingtest.Bench(b, newStore) }

// TestMigrations opens one file from several goroutines at once and again
// later: each migration is applied once, the data stays, and the file is in
// WAL mode.
func TestMigrations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "booking.db")
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := sqlitebooking.Open(ctx, path)
			if err != nil {
				t.Errorf("concurrent Open: %v", err)
				return
			}
			s.Close()
		}()
	}
	wg.Wait()
	s := open(t, path)
	c, err := s.CreateConcert(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, path)
	sch, err := s.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID, StartsAt: time.Now()})
	if err != nil {
		t.Fatalf("CreateSchedule after reopening: %v", err)
	}
	if sch.ConcertID != c.ID {
		t.Errorf("schedule of concert %d, want %d", sch.ConcertID, c.ID)
	}

	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var versions, applied int
	if err := db.QueryRow(`SELECT count(*), count(DISTINCT version) FROM schema_migrations`).Scan(&applied, &versions); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if want := len(files); applied != want || versions != want {
		t.Errorf("schema_migrations has %d rows for %d versions, want %d and %d (one per migration file)", applied, versions, want, want)
	}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
}

// TestLockedFile holds the file's write lock from another connection for
// longer than the caller waits: the write fails with ErrUnavailable when
// the caller's deadline passes, and succeeds once the lock is gone.
func TestLockedFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "booking.db")
	s := open(t, path)
	other, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.Begin()
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := s.CreateConcert(short, "blocked"); !errors.Is(err, booking.ErrUnavailable) {
		t.Errorf("CreateConcert while another connection writes: err = %v, want ErrUnavailable", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateConcert(ctx, "free"); err != nil {
		t.Errorf("CreateConcert after the lock is gone: %v", err)
	}
}

func TestOpenInvalid(t *testing.T) {
	for _, path := range []string{"", ":memory:", filepath.Join(t.TempDir(), "a?b.db")} {
		if _, err := sqlitebooking.Open(context.Background(), path); !errors.Is(err, booking.ErrInvalid) {
			t.Errorf("Open(%q) err = %v, want ErrInvalid", path, err)
		}
	}
}
