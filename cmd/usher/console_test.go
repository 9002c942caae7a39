package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"usher/internal/testenv"
)

// consoleSignIn signs in to the console at base (its public path) and
// returns the session cookie.
func consoleSignIn(t *testing.T, base, key string) *http.Cookie {
	t.Helper()
	res, err := http.Post(base+"session", "application/json", strings.NewReader(`{"key":"`+key+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || len(res.Cookies()) != 1 {
		t.Fatalf("sign in at %s = %d %s, cookies %v", base, res.StatusCode, b, res.Cookies())
	}
	return res.Cookies()[0]
}

// consoleTicks opens the live stream and returns the times of its ticks.
func consoleTicks(t *testing.T, ctx context.Context, base string, c *http.Cookie) <-chan time.Time {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"live", nil)
	req.AddCookie(c)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		res.Body.Close()
		t.Fatalf("GET %slive = %d", base, res.StatusCode)
	}
	out := make(chan time.Time)
	go func() {
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var tick struct{ At time.Time }
			if json.Unmarshal([]byte(data), &tick) == nil {
				select {
				case out <- tick.At:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// TestConsoleOnServe: `usher serve` mounts the console at /console/ on
// its admin listener, not on the visitors' one, and its live stream
// outlives the server's read and write timeouts (15 s and 30 s): a tab
// stays live for the night.
func TestConsoleOnServe(t *testing.T) {
	t.Parallel()
	const key = "serve-console-admin-key-0123456789"
	public := startServe(t, nil, "--addr", "127.0.0.1:0", "--data-dir", testenv.DataDir(t), "--admin-key", key, "--insecure-cookies")
	if code, _ := get(t, http.DefaultClient, public+"/console/"); code != 404 {
		t.Errorf("GET /console/ on the visitors' listener = %d, want 404", code)
	}
	base := adminOf(t, public) + "/console/"
	c := consoleSignIn(t, base, key)
	if c.Path != "/console/" || c.Secure {
		t.Errorf("cookie path %q secure %v, want /console/ without Secure (--insecure-cookies)", c.Path, c.Secure)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ticks := consoleTicks(t, ctx, base, c)
	first, ok := <-ticks
	if !ok {
		t.Fatal("no first tick")
	}
	for at := range ticks {
		if at.Sub(first) > 35*time.Second {
			return
		}
	}
	t.Fatal("the live stream ended within 35 s")
}

// TestConsoleOnProxy: `usher proxy` serves the console at /console/ on
// its admin listener, with the cookie scoped there; its reserved prefix on
// the visitors' listener answers 404 for the console and the admin API,
// never forwarding them to the origin; --console=false leaves it out.
func TestConsoleOnProxy(t *testing.T) {
	t.Parallel()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the origin got %s", r.URL.Path)
	}))
	defer origin.Close()
	base := startProxy(t, nil, "--addr", "127.0.0.1:0", "--origin", origin.URL, "--data-dir", testenv.DataDir(t),
		"--admin-key", proxyAdminKey, "--insecure-cookies")
	if code, _ := get(t, http.DefaultClient, base+"/_usher/console/"); code != 404 {
		t.Errorf("GET /_usher/console/ on the visitors' listener = %d, want 404", code)
	}
	if code, _, _ := (client{t, base}).do("GET", "/_usher/api/v1/rooms", proxyAdminKey, ""); code != 404 {
		t.Errorf("GET /_usher/api/v1/rooms with the admin key on the visitors' listener = %d, want 404", code)
	}
	console := adminOf(t, base) + "/console/"
	if code, body := get(t, http.DefaultClient, console); code != 200 || !strings.Contains(body, "usher console") {
		t.Fatalf("GET %s = %d", console, code)
	}
	c := consoleSignIn(t, console, proxyAdminKey)
	if c.Path != "/console/" {
		t.Errorf("cookie path %q, want /console/", c.Path)
	}
	req, _ := http.NewRequest("GET", console+"api/v1/rooms/sale", nil)
	req.AddCookie(c)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(b), `"room":"sale"`) {
		t.Errorf("GET the room through the console = %d %s", res.StatusCode, b)
	}
	var info struct{ Booking bool }
	req, _ = http.NewRequest("GET", console+"session", nil)
	req.AddCookie(c)
	if res, err := http.DefaultClient.Do(req); err == nil {
		json.NewDecoder(res.Body).Decode(&info)
		res.Body.Close()
		if info.Booking {
			t.Error("the proxy's console says it has a booking backbone")
		}
	}

	off := startProxy(t, nil, "--addr", "127.0.0.1:0", "--origin", origin.URL, "--data-dir", testenv.DataDir(t),
		"--admin-key", proxyAdminKey, "--console=false")
	if code, _ := get(t, http.DefaultClient, adminOf(t, off)+"/console/"); code != 404 {
		t.Errorf("--console=false: GET /console/ on the admin listener = %d, want 404", code)
	}
}
