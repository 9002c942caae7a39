package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"usher/internal/testenv"
)

// TestAdminListener: on `usher serve`, every admin route, the console and
// /metrics answer 404 on the visitors' listener, the admin key
// notwithstanding, as if they did not exist; on the admin listener they
// work, and so does a visitor's route on the visitors' listener.
func TestAdminListener(t *testing.T) {
	t.Parallel()
	const key = "admin-listener-admin-key-0123456789"
	base := startServe(t, nil, "--addr", "127.0.0.1:0", "--data-dir", testenv.DataDir(t), "--admin-key", key, "--insecure-cookies")
	admin := adminOf(t, base)
	if admin == base {
		t.Fatalf("the admin listener is the visitors' (%s)", base)
	}
	pub, adm := client{t, base}, client{t, admin}
	if st, _, body := adm.do("PUT", "/api/v1/rooms/sale", key, `{"max_active":2,"admit_rate":20,"interval_ms":50}`); st != 201 {
		t.Fatalf("PUT room on the admin listener: %d %v", st, body)
	}
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/api/v1/rooms", ""},
		{"GET", "/api/v1/rooms/sale", ""},
		{"PUT", "/api/v1/rooms/sale", `{"max_active":3}`},
		{"DELETE", "/api/v1/rooms/sale", ""},
		{"POST", "/api/v1/rooms/sale/invites", `{"count":1}`},
		{"POST", "/api/v1/rooms/sale/signals", `{}`},
		{"GET", "/api/v1/rooms/sale/analytics", ""},
		{"GET", "/api/v1/rooms/sale/events", ""},
		{"GET", "/api/v1/bypass", ""},
		{"POST", "/api/v1/concerts", `{"name":"x"}`},
		{"GET", "/api/v1/schedules/1/sales", ""},
		{"GET", "/metrics", ""},
	} {
		st, _, body := pub.do(r.method, r.path, key, r.body)
		want := 404
		if r.path == "/api/v1/concerts" {
			want = 405 // GET /api/v1/concerts is the visitors'
		}
		if st != want {
			t.Errorf("%s %s with the admin key on the visitors' listener: %d %v, want %d", r.method, r.path, st, body, want)
		}
	}
	for _, path := range []string{"/console/", "/console/session", "/console"} {
		if code, _ := get(t, noRedirect, base+path); code != 404 {
			t.Errorf("GET %s on the visitors' listener: %d, want 404", path, code)
		}
	}
	if st, _, body := adm.do("GET", "/api/v1/rooms/sale", key, ""); st != 200 || body["room"] != "sale" {
		t.Errorf("GET room on the admin listener: %d %v", st, body)
	}
	if st, _, _ := adm.do("GET", "/metrics", key, ""); st != 200 {
		t.Errorf("GET /metrics on the admin listener with the key: %d, want 200", st)
	}
	if code, body := get(t, http.DefaultClient, admin+"/console/"); code != 200 || !strings.Contains(body, "usher console") {
		t.Errorf("GET /console/ on the admin listener: %d", code)
	}
	consoleSignIn(t, admin+"/console/", key)
	if st, _, body := pub.do("POST", "/api/v1/rooms/sale/entries", "", `{}`); st != 201 {
		t.Errorf("enter on the visitors' listener: %d %v", st, body)
	}
	if st, _, _ := pub.do("GET", "/.well-known/jwks.json", "", ""); st != 200 {
		t.Errorf("JWKS on the visitors' listener: %d", st)
	}
}

// noRedirect is a client that returns redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

var listeningRE = regexp.MustCompile(`(serving|admin) on http://127\.0\.0\.1:(\d+) \(listening on (\S+), ([a-zA-Z4 ]+)[;)]`)

// TestListenersPrintBoundAddresses: serve, proxy and auth print the
// address each listener binds and what it reaches, the port of the URL
// being the bound one: every interface for --addr :0, loopback for
// 127.0.0.1 (the admin listener's default).
func TestListenersPrintBoundAddresses(t *testing.T) {
	t.Parallel()
	origin := testenv.ClosedAddr(t)
	for _, tc := range []struct {
		command, health string
		args            []string
	}{
		{"serve", "/healthz", nil},
		{"proxy", "/_usher/healthz", []string{"--origin", "http://" + origin}},
		{"auth", "/_usher/healthz", nil},
	} {
		t.Run(tc.command, func(t *testing.T) {
			t.Parallel()
			for _, addr := range []string{":0", "127.0.0.1:0"} {
				args := append([]string{"--addr", addr, "--data-dir", testenv.DataDir(t)}, tc.args...)
				_, stdout, _ := startCommandOutput(t, tc.command, tc.health, nil, args...)
				got := map[string][]string{}
				for _, m := range listeningRE.FindAllStringSubmatch(stdout.String(), -1) {
					got[m[1]] = m[2:]
				}
				if len(got) != 2 {
					t.Fatalf("--addr %s: want a serving and an admin line naming the bound address, got:\n%s", addr, stdout)
				}
				pub, adm := got["serving"], got["admin"]
				wantPub := []string{"[::]:" + pub[0], "every interface"}
				if addr == ":0" && strings.HasPrefix(pub[1], "0.0.0.0:") { // no IPv6 here
					wantPub = []string{"0.0.0.0:" + pub[0], "every IPv4 interface"}
				} else if addr != ":0" {
					wantPub = []string{"127.0.0.1:" + pub[0], "loopback only"}
				}
				if pub[1] != wantPub[0] || pub[2] != wantPub[1] {
					t.Errorf("--addr %s: visitors' listener %q, want %q", addr, pub[1:], wantPub)
				}
				if adm[1] != "127.0.0.1:"+adm[0] || adm[2] != "loopback only" {
					t.Errorf("--addr %s: admin listener %q, want 127.0.0.1:%s, loopback only", addr, adm[1:], adm[0])
				}
			}
		})
	}
}

// TestDataDirLocked: a second `usher serve` on a data directory that one
// serves from stops, naming the flag and the process that holds it; once
// the first stops, the directory can be served again. A proxy on the
// same directory (its own rooms file) is not refused.
func TestDataDirLocked(t *testing.T) {
	t.Parallel()
	dir := testenv.DataDir(t)
	env := func(k string) string { return map[string]string{"USHER_DATA_DIR": dir}[k] }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	stdout := &syncBuffer{}
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, env, stdout, io.Discard)
	}()
	waitFor(t, "the first serve", func() bool { return servingRE.MatchString(stdout.String()) })

	// The second, until it fails or (today's bug) serves.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	second, out2 := make(chan error, 1), &syncBuffer{}
	go func() {
		second <- run(ctx2, []string{"serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, env, out2, io.Discard)
	}()
	var err error
	waitFor(t, "the second serve to stop or serve", func() bool {
		select {
		case err = <-second:
			return true
		default:
			if servingRE.MatchString(out2.String()) {
				cancel2()
				<-second
				t.Fatalf("a second serve on %s started: %s", dir, out2)
			}
			return false
		}
	})
	pid := "pid " + strconv.Itoa(os.Getpid())
	if err == nil || !strings.Contains(err.Error(), "USHER_DATA_DIR") || !strings.Contains(err.Error(), "in use by another usher serve") ||
		!strings.Contains(err.Error(), pid) {
		t.Errorf("second serve on %s: %v, want an error naming the data directory and the holder (%s)", dir, err, pid)
	}
	startProxy(t, map[string]string{"USHER_DATA_DIR": dir}, "--addr", "127.0.0.1:0", "--origin", "http://"+testenv.ClosedAddr(t))

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "serve.lock")); err != nil {
		t.Errorf("lock file: %v", err)
	}
	startServe(t, map[string]string{"USHER_DATA_DIR": dir}, "--addr", "127.0.0.1:0")
}
