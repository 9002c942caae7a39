package sqlmigrate_test

import (
	"testing"
	"testing/fstest"

	"usher/internal/sqlmigrate"
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
