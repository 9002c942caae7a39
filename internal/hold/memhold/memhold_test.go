package memhold_test

import (
	"testing"

	"usher/internal/hold"
	"usher/internal/hold/holdtest"
	"usher/internal/hold/memhold"
)

func newStore(testing.TB) hold.Store { return memhold.New() }

func TestConformance(t *testing.T) { holdtest.Run(t, newStore) }

func BenchmarkStore(b *testing.B) { holdtest.Bench(b, newStore) }
