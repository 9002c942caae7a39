package mysqlanalytics_test

import (
	"context"
	"testing"

	"usher/internal/analytics"
	"usher/internal/analytics/analyticstest"
	"usher/internal/analytics/mysqlanalytics"
	"usher/internal/testenv"
)

func newStore(tb testing.TB) analytics.Store {
	s, err := mysqlanalytics.Open(context.Background(), testenv.MySQLDatabase(tb), 4)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	analyticstest.Run(t, newStore)
}

// TestReopen: a second Open of the database applies no migration again and
// keeps the rows.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	u := testenv.MySQLDatabase(t)
	s, err := mysqlanalytics.Open(ctx, u, 2)
	if err != nil {
		t.Fatal(err)
	}
	t0 := analyticstest.Base()
	if _, err := analytics.New(s, analytics.Options{}).Apply(ctx, analyticstest.Script("r", t0)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = mysqlanalytics.Open(ctx, u, 2)
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
