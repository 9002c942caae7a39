package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"usher/internal/testenv"
)

// startProxy runs `usher proxy` with args until the test ends and returns
// startProxy runs `usher proxy` until the test ends.
func startProxy(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	return startCommand(t, "proxy", "/_usher/healthz", env, args...)
}

// proxyAdminKey is the proxy tests' admin key (usher refuses keys shorter
// than 24 characters).
const proxyAdminKey = "proxy-test-admin-key-0123456789"

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func newBrowser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 10 * time.Second}
}

func TestProxyEndToEnd(t *testing.T) {
	t.Parallel()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/done" {
			w.Header().Set("Usher-Release", "1")
		}
		io.WriteString(w, "origin "+r.URL.Path)
	}))
	defer origin.Close()
	base := startProxy(t, map[string]string{"USHER_PROXY_ROUTE": "/b/=room-b", "USHER_PROXY_OPEN": "/static/"},
		"--addr", "127.0.0.1:0", "--origin", origin.URL, "--room", "sale", "--data-dir", testenv.DataDir(t),
		"--admin-key", proxyAdminKey, "--insecure-cookies")
	c := client{t, base}
	for _, room := range []string{"sale", "room-b"} { // both created at start
		if st, _, body := c.admin().do("PUT", "/api/v1/rooms/"+room, proxyAdminKey, `{"max_active":1,"admit_rate":20,"interval_ms":50}`); st != 200 && st != 201 {
			t.Fatalf("room %s: %d %v", room, st, body)
		}
	}

	a, b := newBrowser(t), newBrowser(t)
	if st, body := get(t, a, base+"/"); st != 200 || body != "origin /" {
		t.Fatalf("first visitor: %d %q, want straight through to the origin", st, body)
	}
	st, body := get(t, b, base+"/shop")
	if st != http.StatusTooManyRequests || !strings.Contains(body, `id="refresh"`) || !strings.Contains(body, `id="position">1<`) {
		t.Fatalf("second visitor: %d, want the waiting page at position 1:\n%s", st, body)
	}
	if st, body := get(t, http.DefaultClient, base+"/static/app.js"); st != 200 || body != "origin /static/app.js" {
		t.Errorf("open path: %d %q", st, body)
	}
	if st, body := get(t, b, base+"/b/x"); st != 200 || body != "origin /b/x" {
		t.Errorf("routed room-b is free: %d %q, want the origin", st, body)
	}

	// The origin ends the first visitor's session; the scheduler lets the second in.
	if st, _ := get(t, a, base+"/done"); st != 200 {
		t.Fatalf("/done: %d", st)
	}
	waitFor(t, "second visitor admitted", func() bool {
		st, body := get(t, b, base+"/shop")
		return st == 200 && body == "origin /shop"
	})
	if st, _ := get(t, a, base+"/"); st != http.StatusTooManyRequests {
		t.Errorf("released visitor: %d, want 429 (the slot is taken)", st)
	}

	if st, _, _ := (client{t, base}).do("GET", "/_usher/metrics", proxyAdminKey, ""); st != http.StatusNotFound {
		t.Errorf("metrics on the visitors' listener: %d, want 404", st)
	}
	admin := adminOf(t, base)
	if st, _ := get(t, http.DefaultClient, admin+"/metrics"); st != http.StatusUnauthorized {
		t.Errorf("metrics without the admin key: %d, want 401", st)
	}
	req, _ := http.NewRequest("GET", admin+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+proxyAdminKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(res.Body)
	res.Body.Close()
	metrics := string(mb)
	for _, want := range []string{`usher_proxy_origin_responses_total{class="2xx",room="sale"}`, "usher_proxy_origin_seconds_bucket", "usher_proxy_origin_inflight"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestProxyBadSettings(t *testing.T) {
	t.Parallel()
	for name, args := range map[string][]string{
		"no origin":     {"--addr", "127.0.0.1:0"},
		"bad origin":    {"--origin", "ftp://x"},
		"bad route":     {"--origin", "http://127.0.0.1:1", "--route", "/a/"},
		"reserved path": {"--origin", "http://127.0.0.1:1", "--open", "/_usher/x"},
		"bad room":      {"--origin", "http://127.0.0.1:1", "--room", "Sale!"},
		"bad lang":      {"--origin", "http://127.0.0.1:1", "--lang", "ru"},
		"no template":   {"--origin", "http://127.0.0.1:1", "--waiting-template", "/nonexistent/waiting.html"},
		"bad bypass":    {"--origin", "http://127.0.0.1:1", "--bypass-cidr", "10.0.0.0/33"},
		"twice bypass":  {"--origin", "http://127.0.0.1:1", "--bypass-cidr", "10.0.0.0/8", "--bypass-cidr", "10.1.0.0/8"},
		"no secrets":    {"--origin", "http://127.0.0.1:1", "--bypass-secrets", "/nonexistent/secrets"},
	} {
		t.Run(name, func(t *testing.T) {
			args := append(args, "--data-dir", testenv.DataDir(t))
			err := proxy(context.Background(), args, func(string) string { return "" }, io.Discard, io.Discard)
			if err == nil {
				t.Errorf("proxy(%q) = nil, want an error", args)
			}
		})
	}
}

func TestProxyWaitingPageLanguageAndTemplate(t *testing.T) {
	t.Parallel()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "origin") }))
	defer origin.Close()
	run := func(env map[string]string, args ...string) string {
		base := startProxy(t, env, append([]string{"--addr", "127.0.0.1:0", "--origin", origin.URL, "--data-dir", testenv.DataDir(t),
			"--admin-key", proxyAdminKey, "--insecure-cookies"}, args...)...)
		c := client{t, base}
		if st, _, body := c.admin().do("PUT", "/api/v1/rooms/sale", proxyAdminKey, `{"state":"paused"}`); st != 200 && st != 201 {
			t.Fatalf("pause: %d %v", st, body)
		}
		_, body := get(t, newBrowser(t), base+"/shop")
		return body
	}
	if body := run(map[string]string{"USHER_PROXY_LANG": "ko"}); !strings.Contains(body, "아직 판매가 시작되지 않았습니다") {
		t.Errorf("USHER_PROXY_LANG=ko: no Korean paused message:\n%s", body)
	}
	tmpl := filepath.Join(t.TempDir(), "waiting.html")
	if err := os.WriteFile(tmpl, []byte(`<h1>Custom {{.State}} {{.Position}}</h1>`), 0o600); err != nil {
		t.Fatal(err)
	}
	if body := run(nil, "--waiting-template", tmpl); !strings.Contains(body, "<h1>Custom paused 1</h1>") {
		t.Errorf("--waiting-template: %s", body)
	}
}
