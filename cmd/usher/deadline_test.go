package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"usher/internal/testenv"
)

// TestServeHungRedis stops redis-server (SIGSTOP): its connections stay up
// and it never answers, the hang that only a deadline ends (the client's own
// would wait about 10 s). With --store-timeout 200ms, enters, exact polls and
// gated requests answer 503 with Retry-After. The client's own timeout is
// set to an hour (write_timeout), so only usher's deadline can end the
// calls: without it they would hang past the one-minute guard that each
// request has against a hang. No duration is asserted.
func TestServeHungRedis(t *testing.T) {
	startRedis, port := redisServer(t)
	redis := startRedis()
	t.Cleanup(func() { redis.Process.Kill(); redis.Wait() })
	dir := testenv.DataDir(t)
	base := startServe(t, map[string]string{"USHER_DATA_DIR": dir},
		"--addr", "127.0.0.1:0", "--store", "redis://127.0.0.1:"+port+"/0?write_timeout=1h", "--store-timeout", "200ms")
	// Registered after startServe, so it runs first: usher shuts down on a
	// Redis that answers again.
	t.Cleanup(func() { redis.Process.Signal(syscall.SIGCONT) })
	key, _ := os.ReadFile(filepath.Join(dir, "admin.key"))
	admin := strings.TrimSpace(string(key))
	c := client{t, base}
	pass, ticket := c.oneSlotSale(admin)

	if err := redis.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ method, path, bearer, body string }{
		{"POST", "/api/v1/rooms/sale/entries", admin, `{"visitor_id":"c"}`},
		{"GET", "/api/v1/rooms/sale/entries/me", ticket, ""}, // near the front: an exact answer needs the store
		{"GET", "/api/v1/rooms/sale/pass", pass, ""},         // the gate fails closed
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		req, _ := http.NewRequestWithContext(ctx, tc.method, base+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+tc.bearer)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("%s %s with Redis hung: %v (the store deadline did not end the call)", tc.method, tc.path, err)
		}
		var b struct{ Error struct{ Code string } }
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		cancel()
		json.Unmarshal(raw, &b)
		if res.StatusCode != 503 || b.Error.Code != "unavailable" || res.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s with Redis hung = %d %s (Retry-After %q), want 503 unavailable with Retry-After",
				tc.method, tc.path, res.StatusCode, raw, res.Header.Get("Retry-After"))
		}
	}
}
