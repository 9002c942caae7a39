package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"usher/internal/console"
	"usher/internal/queue"
	"usher/internal/queue/redisqueue"
	"usher/internal/testenv"
)

// BenchmarkConsole times what the console costs the server per tick and
// per page load, with one room of 100,000 waiting visitors and, for
// reference in the same run, with an empty room: the console reads
// counters only, so the two must cost the same. On the memory store always;
// on Redis with USHER_TEST_REDIS.
//
//	go test -run '^$' -bench BenchmarkConsole -benchtime 2000x ./internal/console/
func BenchmarkConsole(b *testing.B) {
	stores := map[string]func(b *testing.B) queue.Store{
		"memory": func(*testing.B) queue.Store { return nil },
		"redis": func(b *testing.B) queue.Store {
			c := testenv.Redis(b)
			return redisqueue.New(c, testenv.RedisPrefix(b, c))
		},
	}
	for _, store := range []string{"memory", "redis"} {
		for _, waiting := range []int{0, 100_000} {
			b.Run(fmt.Sprintf("%s/waiting=%d", store, waiting), func(b *testing.B) {
				e := newEnv(b, envOptions{store: stores[store](b)})
				s := queue.DefaultSettings()
				s.State = queue.Paused
				e.room("big", s)
				fill(b, e.q, "big", waiting)
				testenv.Eventually(b, time.Minute, "the view of 'big'", func() bool {
					v, ok := e.q.View("big")
					return ok && v.Waiting == int64(waiting)
				})
				cookie, _ := e.signIn()
				h := e.srv.Config.Handler
				get := func(b *testing.B, path string, headers ...string) {
					req := httptest.NewRequest("GET", path, nil)
					for _, hd := range headers {
						k, v, _ := strings.Cut(hd, ": ")
						req.Header.Set(k, v)
					}
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					if w.Code != 200 {
						b.Fatalf("GET %s = %d %s", path, w.Code, w.Body)
					}
				}
				b.Run("tick", func(b *testing.B) {
					for b.Loop() {
						if _, err := json.Marshal(e.con.Snapshot()); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run("sample", func(b *testing.B) {
					for b.Loop() {
						e.con.SampleOnce()
					}
				})
				for range console.HistoryLen { // a full hour of history
					e.con.SampleOnce()
				}
				b.Run("page", func(b *testing.B) {
					// What opening a room's page asks: the page, the room's
					// settings (forwarded to the API), its hour of history.
					for b.Loop() {
						get(b, "/console/")
						get(b, "/console/api/v1/rooms/big", cookie)
						get(b, "/console/rooms/big/history", cookie)
					}
				})
				b.Run("api-reference", func(b *testing.B) {
					// The API's own GET /api/v1/rooms/{room}, without the console.
					for b.Loop() {
						get(b, "/api/v1/rooms/big", "Authorization: Bearer "+adminKey)
					}
				})
			})
		}
	}
}

// fill enters n visitors, from 16 goroutines (Redis round trips overlap).
func fill(b *testing.B, q *queue.Queue, room string, n int) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			for i := g; i < n; i += 16 {
				if _, _, err := q.Enter(context.Background(), room, fmt.Sprintf("v%d", i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// BenchmarkSampleIdleRooms is one history sample of an instance holding
// 10,000 rooms nobody is in, on the memory store: what the console costs
// each second for rooms it keeps no history of.
//
//	go test -run '^$' -bench BenchmarkSampleIdleRooms ./internal/console/
func BenchmarkSampleIdleRooms(b *testing.B) {
	e := newEnv(b, envOptions{})
	for i := range 10_000 {
		e.room(fmt.Sprintf("idle-%d", i), queue.DefaultSettings())
	}
	e.con.SampleOnce()
	for b.Loop() {
		e.con.SampleOnce()
	}
}
