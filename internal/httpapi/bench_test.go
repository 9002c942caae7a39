package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/httpapi"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/token"
	"usher/internal/wire"
)

// BenchmarkStatusPollHandler measures the API handler answering a status
// poll for a visitor far from the front (no store call), in process, next to
// BenchmarkTrivialJSONHandler: the handler-only share of the HTTP ratio
// that scripts/bench-http.sh measures over the network.
func BenchmarkStatusPollHandler(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := queue.New(memqueue.New(), queue.Options{})
	s := queue.DefaultSettings()
	s.State = queue.Paused
	if err := q.PutRoom(ctx, "sale", s); err != nil {
		b.Fatal(err)
	}
	var last queue.Entry
	for i := range 2000 {
		e, _, err := q.Enter(ctx, "sale", fmt.Sprintf("v%d", i))
		if err != nil {
			b.Fatal(err)
		}
		last = e
	}
	go q.Run(ctx)
	keys, err := token.LoadDir(b.TempDir(), time.Now)
	if err != nil {
		b.Fatal(err)
	}
	h := httpapi.NewServer(httpapi.Config{Queue: q, Keys: keys, AdminKey: "k", Registry: prometheus.NewRegistry()})
	ticket := keys.SignTicket(token.Ticket{Room: "sale", Visitor: last.Visitor, Seq: last.Seq, IssuedAt: time.Now()})
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest("GET", "/api/v1/rooms/sale/entries/me", nil)
		req.Header.Set("Authorization", "Bearer "+ticket)
		for pb.Next() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != 200 {
				b.Fatalf("status %d %s", rec.Code, rec.Body)
			}
		}
	})
}

func BenchmarkTrivialJSONHandler(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(wire.Entry{Room: "sale", State: "waiting", RoomState: "open", Position: 1500, Ahead: 1499, ETASeconds: 36, PollAfterMS: 3600})
	})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest("GET", "/status", nil)
		for pb.Next() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
		}
	})
}
