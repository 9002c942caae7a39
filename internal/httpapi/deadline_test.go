package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/httpapi"
	"usher/internal/queue"
	"usher/internal/queue/redisqueue"
	"usher/internal/testenv"
	"usher/internal/token"
)

// TestHungStore: with a store that never answers, a gated request and a
// status poll end with 503 and Retry-After at the store deadline (or the
// gated request passes under fail-open), instead of waiting on the store.
// The bound is the test client's timeout, far above the store deadline; no
// elapsed time is asserted.
func TestHungStore(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		t.Run(fmt.Sprintf("failOpen=%v", failOpen), func(t *testing.T) {
			q := queue.New(redisqueue.New(testenv.HungRedis(t), "usher:"), queue.Options{StoreTimeout: 200 * time.Millisecond})
			keys, err := token.LoadDir(t.TempDir(), time.Now)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(httpapi.NewServer(httpapi.Config{
				Queue: q, Keys: keys, AdminKey: adminKey, Registry: prometheus.NewRegistry(), FailOpen: failOpen,
			}))
			t.Cleanup(srv.Close)
			pass, err := keys.SignPass(token.Pass{Room: "sale", Visitor: "a", ExpiresAt: time.Now().Add(time.Minute).Truncate(time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			ticket := keys.SignTicket(token.Ticket{Room: "sale", Visitor: "b", Seq: 1, IssuedAt: time.Now()})
			client := validated(t, &http.Client{Timeout: 30 * time.Second}) // the bound: a hung call fails the test here
			get := func(path, bearer string) (int, string, string) {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
				req.Header.Set("Authorization", "Bearer "+bearer)
				res, err := client.Do(req)
				if err != nil {
					t.Fatalf("GET %s: %v (the store deadline did not end the call)", path, err)
				}
				defer res.Body.Close()
				body, _ := io.ReadAll(res.Body)
				r := resp{status: res.StatusCode, header: res.Header, body: body}
				code := ""
				if res.StatusCode != 200 {
					code = r.errorCode(t)
				}
				return res.StatusCode, code, res.Header.Get("Retry-After")
			}

			status, code, retry := get("/api/v1/rooms/sale/entries/me", ticket)
			if status != 503 || code != "unavailable" || retry == "" {
				t.Errorf("status poll on a hung store = %d %s (Retry-After %q), want 503 unavailable with Retry-After", status, code, retry)
			}
			status, code, retry = get("/api/v1/rooms/sale/pass", pass)
			switch {
			case failOpen && status != 200:
				t.Errorf("gated request on a hung store, failing open = %d %s, want 200", status, code)
			case !failOpen && (status != 503 || code != "unavailable" || retry == ""):
				t.Errorf("gated request on a hung store = %d %s (Retry-After %q), want 503 unavailable with Retry-After", status, code, retry)
			}
		})
	}
}
