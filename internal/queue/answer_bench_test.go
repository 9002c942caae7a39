package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
)

// BenchmarkAnswerPoll is the queue's part of a status poll far back in a
// line of 20,000: the estimate from the view (Queue.Status) and what the
// visitor is told (Queue.Place), both reading the view by pointer.
func BenchmarkAnswerPoll(b *testing.B) {
	ctx := context.Background()
	q := queue.New(memqueue.New(), queue.Options{})
	s := queue.DefaultSettings()
	s.State = queue.Paused
	if err := q.PutRoom(ctx, "r", s); err != nil {
		b.Fatal(err)
	}
	var last queue.Entry
	for i := range 20000 {
		e, _, err := q.Enter(ctx, "r", fmt.Sprintf("v%d", i))
		if err != nil {
			b.Fatal(err)
		}
		last = e
	}
	if err := q.PutRoom(ctx, "r", s); err != nil { // refreshes the view
		b.Fatal(err)
	}
	issued := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		e, est, err := q.Status(ctx, "r", "v19999", last.Seq, issued)
		if err != nil || !est {
			b.Fatal(err, est)
		}
		p := q.Place("r", e)
		if p.Position != 20000 {
			b.Fatal(p.Position)
		}
	}
}
