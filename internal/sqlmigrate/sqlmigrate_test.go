package sqlmigrate_test

import (
	"context"
	"errors"
	"testing"
	"testing/fstest"

	"usher/internal/mysqldb"
	"usher/internal/sqlmigrate"
	"usher/internal/testenv"
)

func TestRead(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0010_later.sql": {Data: []byte("B")},
		"m/0002_first.sql": {Data: []byte("A")},
		"m/README":         {Data: []byte("not a migration")},
	}
	got, err := sqlmigrate.Read(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Version != 2 || got[0].SQL != "A" || got[1].Version != 10 || got[1].Name != "m/0010_later.sql" {
		t.Errorf("Read = %+v, want 0002 then 0010 (numeric order)", got)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"no number":   {"m/x_init.sql": {}},
		"one version": {"m/1_a.sql": {}, "m/01_b.sql": {}},
	} {
		if _, err := sqlmigrate.Read(fsys, "m"); err == nil {
			t.Errorf("%s: Read succeeded, want an error", name)
		}
	}
}

// TestMySQL: a migration whose second statement fails is an error and is
// not recorded; the next Open, with it fixed, applies it; one already
// recorded is not run again.
func TestMySQL(t *testing.T) {
	u := testenv.MySQLDatabase(t)
	ctx := context.Background()
	db, err := mysqldb.Open(ctx, u, 1, true, errors.New("invalid"), errors.New("unavailable"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bad := fstest.MapFS{
		"m/0001_a.sql": {Data: []byte("CREATE TABLE a (x INT);")},
		"m/0002_b.sql": {Data: []byte("CREATE TABLE IF NOT EXISTS b (x INT); CREATE TABLE c (x NOTATYPE);")},
	}
	if err := sqlmigrate.MySQL(ctx, db, bad, "m", "mig", "usher_test_mig"); err == nil {
		t.Fatal("a failing second statement: no error")
	}
	good := fstest.MapFS{
		"m/0001_a.sql": {Data: []byte("CREATE TABLE a (x INT);")}, // would fail if run again
		"m/0002_b.sql": {Data: []byte("CREATE TABLE IF NOT EXISTS b (x INT); CREATE TABLE c (x INT);")},
	}
	if err := sqlmigrate.MySQL(ctx, db, good, "m", "mig", "usher_test_mig"); err != nil {
		t.Fatalf("after the fix: %v", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM mig`).Scan(&n); err != nil || n != 2 {
		t.Errorf("mig has %d rows (%v), want 2", n, err)
	}
}
