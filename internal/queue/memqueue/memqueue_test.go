package memqueue_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/queue/queuetest"
)

func newStore(testing.TB) queue.Store { return memqueue.New() }

func TestConformance(t *testing.T) { queuetest.Run(t, newStore) }

// TestRefusesShards: one process keeps one line per room.
func TestRefusesShards(t *testing.T) {
	set := queue.DefaultSettings()
	set.Shards = 4
	if _, err := memqueue.New().PutRoom(context.Background(), "r", set, queue.PutOptions{}); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("PutRoom of 4 shards = %v, want ErrInvalid", err)
	}
}

func BenchmarkStore(b *testing.B) { queuetest.Bench(b, newStore) }

// BenchmarkCollectWithLongLine measures one garbage collection (runtime.GC)
// with 300,000 visitors waiting in one room: the mark work a long line adds
// to every collection of the process (docs/benchmarks.md). gc-cpu-ms/op is
// the collector's CPU time (runtime/metrics), which a busy machine disturbs
// less than the wall time of ns/op.
func BenchmarkCollectWithLongLine(b *testing.B) {
	s := memqueue.New()
	set := queue.DefaultSettings()
	set.State = queue.Paused
	ctx := context.Background()
	if _, err := s.PutRoom(ctx, "r", set, queue.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for i := range 300_000 {
		// One allocation per id, as the HTTP layer makes them.
		if _, _, err := s.Enter(ctx, "r", fmt.Sprintf("visitor-%022d", i), now, queue.EnterOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	gcCPU := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(gcCPU)
	before := gcCPU[0].Value.Float64()
	for b.Loop() {
		runtime.GC()
	}
	metrics.Read(gcCPU)
	b.ReportMetric((gcCPU[0].Value.Float64()-before)*1000/float64(b.N), "gc-cpu-ms/op")
	runtime.KeepAlive(s)
}
