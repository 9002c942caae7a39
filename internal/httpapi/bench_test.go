package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/event"
	"usher/internal/event/natsevent"
	"usher/internal/httpapi"
	"usher/internal/mq/natsmq"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/testenv"
	"usher/internal/token"
	"usher/internal/wire"
)

// BenchmarkStatusPollHandler measures the API handler answering a status
// poll for a visitor far from the front (no store call), in process, next to
// BenchmarkTrivialJSONHandler: the handler-only share of the HTTP ratio
// that scripts/bench-http.sh measures over the network.
//
// The events sub-benchmarks run it with and without the event publisher
// (natsevent, on an embedded NATS): a poll emits nothing, so they must
// match (docs/benchmarks.md#events-on-the-hot-path).
func BenchmarkStatusPollHandler(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(eventsName(on), func(b *testing.B) { benchStatusPoll(b, on) })
	}
}

func eventsName(on bool) string {
	if on {
		return "events=on"
	}
	return "events=off"
}

// benchEmitter returns the emitter of a benchmark: nil, or a running
// Publisher on an embedded NATS of its own, whose published and dropped
// events are reported when the benchmark ends. settled(n) waits until n
// events were published or dropped (so that a setup's events are out of
// the way before the timer starts).
func benchEmitter(b *testing.B, on bool) (e event.Emitter, settled func(n float64)) {
	if !on {
		return nil, func(float64) {}
	}
	reg := prometheus.NewRegistry()
	pub, _ := eventStream(b, reg)
	reasons := map[string]float64{}
	counts := func() (published, dropped float64) {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				switch mf.GetName() {
				case "usher_events_published_total":
					published += m.GetCounter().GetValue()
				case "usher_events_dropped_total":
					dropped += m.GetCounter().GetValue()
					if v := m.GetCounter().GetValue(); v > 0 {
						reasons[m.GetLabel()[0].GetValue()] = v
					}
				}
			}
		}
		return published, dropped
	}
	var before float64
	b.Cleanup(func() {
		p, d := counts()
		b.ReportMetric((p+d-before)/float64(b.N), "events/op")
		b.ReportMetric(d/max(1, p+d), "dropped-share")
		if d > 0 {
			b.Logf("dropped by reason: %v", reasons)
		}
	})
	return pub, func(n float64) {
		testenv.Eventually(b, time.Minute, "the setup's events published", func() bool {
			p, d := counts()
			before = p + d
			return before >= n
		})
	}
}

func benchStatusPoll(b *testing.B, events bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	emitter, settled := benchEmitter(b, events)
	q := queue.New(memqueue.New(), queue.Options{Events: emitter})
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
	q.FlushCounts() // the setup's entries: one counted event
	settled(1)
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

// BenchmarkEnterHandler measures the API handler creating new places
// (admin-named visitors, a paused room), in process, with and without the
// event publisher: each entry emits an entered event.
//
// events=emit-only is the publisher without its Run: the request path's
// own share (the queue's counts; their counted events refused once the
// buffer is full), without the CPU the publisher and the embedded NATS
// server take from the same two cores.
func BenchmarkEnterHandler(b *testing.B) {
	for _, mode := range []string{"events=off", "events=emit-only", "events=on"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			var emitter event.Emitter
			switch mode {
			case "events=on":
				emitter, _ = benchEmitter(b, true)
			case "events=emit-only":
				emitter = idlePublisher(b)
			}
			q := queue.New(memqueue.New(), queue.Options{Events: emitter})
			s := queue.DefaultSettings()
			s.State = queue.Paused
			if err := q.PutRoom(ctx, "sale", s); err != nil {
				b.Fatal(err)
			}
			cctx, stop := context.WithCancel(ctx)
			defer stop()
			go q.RunCounts(cctx)
			keys, err := token.LoadDir(b.TempDir(), time.Now)
			if err != nil {
				b.Fatal(err)
			}
			h := httpapi.NewServer(httpapi.Config{Queue: q, Keys: keys, AdminKey: "k", Registry: prometheus.NewRegistry()})
			var n atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					body := fmt.Sprintf(`{"visitor_id":"v%d"}`, n.Add(1))
					req := httptest.NewRequest("POST", "/api/v1/rooms/sale/entries", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer k")
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Code != 201 {
						b.Fatalf("status %d %s", rec.Code, rec.Body)
					}
				}
			})
		})
	}
}

// idlePublisher is a Publisher on an embedded NATS that nothing runs.
func idlePublisher(b *testing.B) event.Emitter {
	srv, err := natsmq.StartEmbedded(testenv.DataDir(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := natsmq.ConnectEmbedded(srv)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	p, err := natsevent.NewPublisher(nc, natsevent.PublisherOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return p
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
