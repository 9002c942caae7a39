package pganalytics_test

import (
	"context"
	"testing"

	"usher/internal/analytics"
	"usher/internal/analytics/analyticstest"
	"usher/internal/analytics/pganalytics"
	"usher/internal/testenv"
)

func newStore(tb testing.TB) analytics.Store {
	s, err := pganalytics.Open(context.Background(), testenv.PostgresSchema(tb), 4)
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
func BenchmarkApply(b *testing.B) { analyticstest.Bench(b, newStore) }
