package analyticstest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"usher/internal/analytics"
	"usher/internal/event"
)

// BatchSize is the collector's default batch.
const BatchSize = 256

// Bench measures Apply on batches of BatchSize events: "new" counts
// fresh events (half entries, half admissions of the previous batch's
// visitors, so each admission's entry is read from the store), and
// "duplicate", the reference, applies batches already counted (the claim
// alone). Events/s are reported.
func Bench(b *testing.B, newStore NewStore) {
	b.Run("new", func(b *testing.B) {
		a := analytics.New(newStore(b), analytics.Options{})
		t0 := Base()
		b.ResetTimer()
		for i := range b.N {
			if _, err := a.Apply(context.Background(), benchBatch(i, t0)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*BatchSize)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("duplicate", func(b *testing.B) {
		a := analytics.New(newStore(b), analytics.Options{})
		t0 := Base()
		batch := benchBatch(1, t0)
		if _, err := a.Apply(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			if _, err := a.Apply(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*BatchSize)/b.Elapsed().Seconds(), "events/s")
	})
}

// benchBatch is batch i: BatchSize/2 visitors of batch i enter, those of
// batch i-1 are admitted, in four rooms.
func benchBatch(i int, t0 time.Time) []event.Event {
	evs := make([]event.Event, 0, BatchSize)
	at := t0.Add(time.Duration(i) * time.Millisecond)
	for j := range BatchSize / 2 {
		room := fmt.Sprintf("bench-%d", j%4)
		evs = append(evs, Ev(fmt.Sprintf("in-%d-%d", i, j), event.Entered, room, at, fmt.Sprintf("v%d-%d", i, j), &event.Data{ETAMS: 30_000}))
		if i > 0 {
			evs = append(evs, Ev(fmt.Sprintf("ad-%d-%d", i-1, j), event.Admitted, room, at, fmt.Sprintf("v%d-%d", i-1, j), nil))
		}
	}
	return evs
}
