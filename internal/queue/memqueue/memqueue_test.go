package memqueue_test

import (
	"testing"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/queue/queuetest"
)

func newStore(testing.TB) queue.Store { return memqueue.New() }

func TestConformance(t *testing.T) { queuetest.Run(t, newStore) }

func BenchmarkStore(b *testing.B) { queuetest.Bench(b, newStore) }
