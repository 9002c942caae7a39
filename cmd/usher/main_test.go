package main

import (
	"bytes"
	"context"
	"encoding/json"

	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is an io.Writer the test can read while run writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var servingRE = regexp.MustCompile(`serving on (http://\S+)`)

// startServe runs `usher serve` with args until the test ends and returns
// its base URL once /healthz answers.
func startServe(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	getenv := func(k string) string { return env[k] }
	go func() { done <- run(ctx, append([]string{"serve"}, args...), getenv, stdout, stderr) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run returned %v after shutdown, want nil", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("serve exited early: %v\n%s", err, stderr)
		default:
		}
		if m := servingRE.FindStringSubmatch(stdout.String()); m != nil {
			if res, err := http.Get(m[1] + "/healthz"); err == nil {
				res.Body.Close()
				if res.StatusCode == 200 {
					return m[1]
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("serve did not become healthy\nstdout: %s\nstderr: %s", stdout, stderr)
	return ""
}

type client struct {
	t    *testing.T
	base string
}

func (c client) do(method, path, bearer, body string) (int, http.Header, map[string]any) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var m map[string]any
	json.Unmarshal(b, &m)
	return res.StatusCode, res.Header, m
}

// waitFor polls cond until it holds (the scheduler runs in real time).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestServeEmbeddedDefaults(t *testing.T) {
	dir := t.TempDir()
	base := startServe(t, map[string]string{"USHER_DATA_DIR": dir}, "--addr", "127.0.0.1:0")
	key, err := os.ReadFile(filepath.Join(dir, "admin.key"))
	if err != nil {
		t.Fatalf("admin key not generated: %v", err)
	}
	admin := strings.TrimSpace(string(key))
	c := client{t, base}
	if st, _, body := c.do("PUT", "/api/v1/rooms/sale", admin, `{"max_active":2,"admit_rate":20,"interval_ms":50}`); st != 201 {
		t.Fatalf("create room: %d %v", st, body)
	}
	tickets := make([]string, 5)
	for i := range tickets {
		st, _, body := c.do("POST", "/api/v1/rooms/sale/entries", admin, fmt.Sprintf(`{"visitor_id":"u%d"}`, i))
		if st != 201 {
			t.Fatalf("enter u%d: %d %v", i, st, body)
		}
		tickets[i] = body["ticket"].(string)
	}
	// The scheduler admits u0 and u1 (cap 2); u2 waits until u0 finishes.
	var pass string
	waitFor(t, "u0 admitted", func() bool {
		_, _, body := c.do("GET", "/api/v1/rooms/sale/entries/me", tickets[0], "")
		pass, _ = body["pass"].(string)
		return body["state"] == "admitted"
	})
	if st, _, _ := c.do("GET", "/api/v1/rooms/sale/pass", pass, ""); st != 200 {
		t.Fatalf("pass check: %d", st)
	}
	if _, _, body := c.do("GET", "/api/v1/rooms/sale/entries/me", tickets[2], ""); body["state"] != "waiting" {
		t.Fatalf("u2 = %v, want waiting behind the cap", body)
	}
	if st, _, _ := c.do("DELETE", "/api/v1/rooms/sale/entries/me", pass, ""); st != 204 {
		t.Fatalf("finish: %d", st)
	}
	waitFor(t, "u2 admitted after u0 finished", func() bool {
		_, _, body := c.do("GET", "/api/v1/rooms/sale/entries/me", tickets[2], "")
		return body["state"] == "admitted"
	})
}

func TestServeBadSettings(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--store", "postgres://x"}, nil, "--store"},
		{nil, map[string]string{"USHER_STORE": "mem"}, "USHER_STORE"},
		{nil, map[string]string{"USHER_FAIL_OPEN": "sometimes"}, "USHER_FAIL_OPEN"},
		{[]string{"--addr", "nonsense"}, nil, "--addr"},
		{[]string{"--bogus"}, nil, "bogus"},
	} {
		env := map[string]string{"USHER_DATA_DIR": t.TempDir()}
		for k, v := range tc.env {
			env[k] = v
		}
		var stderr bytes.Buffer
		err := run(context.Background(), append([]string{"serve"}, tc.args...), func(k string) string { return env[k] }, io.Discard, &stderr)
		if err == nil || !strings.Contains(err.Error()+stderr.String(), tc.want) {
			t.Errorf("serve %v %v: err = %v, want an error naming %s", tc.args, tc.env, err, tc.want)
		}
	}
	if err := run(context.Background(), []string{"frobnicate"}, os.Getenv, io.Discard, io.Discard); err == nil {
		t.Error("unknown command: want an error")
	}
}

func TestKeysRotate(t *testing.T) {
	dir := t.TempDir()
	env := func(k string) string { return map[string]string{"USHER_DATA_DIR": dir}[k] }
	var out bytes.Buffer
	if err := run(context.Background(), []string{"keys", "rotate", "--activate-in", "10m"}, env, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(context.Background(), []string{"keys", "list"}, env, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(strings.TrimSpace(out.String()), "\n"); lines != 1 {
		t.Errorf("keys list after one rotate into an empty dir:\n%s\nwant a header and 1 key", out.String())
	}
}

// TestServeRedisOutage runs usher against a Redis server of its own, stops
// that server, and checks that usher fails closed with 503 + Retry-After,
// then recovers when Redis is back. It needs redis-server; under CI it must
// run.
func TestServeRedisOutage(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not found under CI: %v", err)
		}
		t.Skip("redis-server not installed")
	}
	port := freePort(t)
	startRedis := func() *exec.Cmd {
		cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "redis-server up", func() bool {
			c, err := net.Dial("tcp", "127.0.0.1:"+port)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		return cmd
	}
	redis := startRedis()
	t.Cleanup(func() { redis.Process.Kill(); redis.Wait() })

	dir := t.TempDir()
	base := startServe(t, map[string]string{"USHER_DATA_DIR": dir},
		"--addr", "127.0.0.1:0", "--store", "redis://127.0.0.1:"+port+"/0")
	key, _ := os.ReadFile(filepath.Join(dir, "admin.key"))
	admin := strings.TrimSpace(string(key))
	c := client{t, base}
	if st, _, body := c.do("PUT", "/api/v1/rooms/sale", admin, `{"max_active":1}`); st != 201 {
		t.Fatalf("create room: %d %v", st, body)
	}
	_, _, body := c.do("POST", "/api/v1/rooms/sale/entries", admin, `{"visitor_id":"a"}`)
	pass, _ := body["pass"].(string)
	_, _, body = c.do("POST", "/api/v1/rooms/sale/entries", admin, `{"visitor_id":"b"}`)
	ticket, _ := body["ticket"].(string)
	if pass == "" || ticket == "" {
		t.Fatalf("setup: pass %q ticket %q", pass, ticket)
	}

	redis.Process.Kill()
	redis.Wait()
	for _, tc := range []struct{ method, path, bearer, body string }{
		{"POST", "/api/v1/rooms/sale/entries", admin, `{"visitor_id":"c"}`},
		{"GET", "/api/v1/rooms/sale/entries/me", ticket, ""}, // b is near the front: exact answer needed
		{"GET", "/api/v1/rooms/sale/pass", pass, ""},         // the gate fails closed
		{"GET", "/readyz", "", ""},
	} {
		st, h, body := c.do(tc.method, tc.path, tc.bearer, tc.body)
		code, _ := body["error"].(map[string]any)["code"].(string)
		if st != 503 || code != "unavailable" || h.Get("Retry-After") == "" {
			t.Errorf("%s %s with Redis down = %d %v (Retry-After %q), want 503 unavailable with Retry-After",
				tc.method, tc.path, st, body, h.Get("Retry-After"))
		}
	}

	redis = startRedis() // empty: a Redis without persistence lost the room
	waitFor(t, "readyz after Redis is back", func() bool {
		st, _, _ := c.do("GET", "/readyz", "", "")
		return st == 200
	})
	if st, _, body := c.do("POST", "/api/v1/rooms/sale/entries", admin, `{"visitor_id":"c"}`); st != 404 {
		t.Errorf("enter after Redis lost its data = %d %v, want 404 room_not_found (the operator re-creates rooms)", st, body)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}
