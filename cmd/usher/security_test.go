package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"usher/internal/testenv"
)

// TestShortAdminKeyRefused: a short admin key, given or in the key file,
// stops usher before anything is written.
func TestShortAdminKeyRefused(t *testing.T) {
	t.Parallel()
	dir := testenv.DataDir(t)
	env := func(k string) string { return map[string]string{"USHER_DATA_DIR": dir}[k] }
	err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--admin-key", "short"}, env, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "admin-key") {
		t.Fatalf("serve --admin-key short: %v, want a bad setting", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("data dir has %d entries after a refused start, want none", len(entries))
	}
	if err := os.WriteFile(filepath.Join(dir, "admin.key"), []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, env, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "admin key file") {
		t.Fatalf("serve with a short admin.key: %v, want refused", err)
	}
}

// TestMetricsAddr: /metrics does not exist on the visitors' address; the
// admin listener serves it to the admin key only; --metrics-addr serves it
// without one.
func TestMetricsAddr(t *testing.T) {
	t.Parallel()
	dir := testenv.DataDir(t)
	port := freePort(t)
	base := startServe(t, map[string]string{"USHER_DATA_DIR": dir}, "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:"+port)
	key, _ := os.ReadFile(filepath.Join(dir, "admin.key"))
	admin := strings.TrimSpace(string(key))
	if st, _, _ := (client{t, base}).do("GET", "/metrics", admin, ""); st != http.StatusNotFound {
		t.Errorf("visitors' /metrics with the key: %d, want 404", st)
	}
	c := client{t, adminOf(t, base)}
	if st, _, _ := c.do("GET", "/metrics", "", ""); st != http.StatusUnauthorized {
		t.Errorf("admin /metrics without the key: %d, want 401", st)
	}
	if st, _, _ := c.do("GET", "/metrics", admin, ""); st != http.StatusOK {
		t.Errorf("admin /metrics with the key: %d, want 200", st)
	}
	waitFor(t, "the metrics listener", func() bool {
		res, err := http.Get("http://127.0.0.1:" + port + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res.StatusCode == 200 && strings.Contains(string(b), "usher_")
	})
}
