package sqliteanalytics_test

import (
	"context"
	"path/filepath"
	"testing"

	"usher/internal/analytics"
	"usher/internal/analytics/analyticstest"
	"usher/internal/analytics/sqliteanalytics"
)

func newStore(tb testing.TB) analytics.Store {
	s, err := sqliteanalytics.Open(context.Background(), filepath.Join(tb.TempDir(), "analytics.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) { analyticstest.Run(t, newStore) }

// TestReopen: a second Open of the file applies no migration again and
// keeps the rows.
func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "analytics.db")
	ctx := context.Background()
	s, err := sqliteanalytics.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := analyticstest.Base()
	if _, err := analytics.New(s, analytics.Options{}).Apply(ctx, analyticstest.Script("r", t0)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqliteanalytics.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := analytics.New(s, analytics.Options{}).Report(ctx, "r", t0, t0.Add(analytics.MaxRange))
	if err != nil || rep.Totals.Arrivals != 3 {
		t.Errorf("after reopening: %+v, %v; want 3 arrivals", rep.Totals.Counts, err)
	}
}
func BenchmarkApply(b *testing.B) { analyticstest.Bench(b, newStore) }
