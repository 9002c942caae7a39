package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"usher/internal/pow"
	"usher/internal/testenv"
	"usher/internal/wire"
)

// TestOnePlacePerClientThroughEdges (issue 30 §1) runs the attack that
// took unlimited places through usher proxy, nginx + usher auth and Caddy
// + usher auth, each as shipped: a client mints visitor cookies (from a
// refused entry into a room that does not exist, or from a room without
// defences) and enters a room with pow_bits and client_enters_per_minute
// 5 with each. Without a solution it must take no place; with a solution
// each, no more than 5.
func TestOnePlacePerClientThroughEdges(t *testing.T) {
	t.Parallel()
	for _, edge := range []string{"proxy", "nginx", "caddy"} {
		t.Run(edge, func(t *testing.T) {
			t.Parallel()
			base := startEdge(t, edge, "--route", "/free/=free")
			testOnePlacePerClient(t, base)
		})
	}
}

// startEdge runs usher proxy, or usher auth behind nginx or Caddy as
// `usher auth --print` configures them, in front of a recording origin,
// with rule flags args; it returns the edge's base URL.
func startEdge(t *testing.T, edge string, args ...string) string {
	t.Helper()
	origin := newEdgeOrigin(t)
	common := append([]string{"--addr", "127.0.0.1:0", "--data-dir", testenv.DataDir(t), "--admin-key", proxyAdminKey,
		"--insecure-cookies"}, args...)
	switch edge {
	case "proxy":
		return startProxy(t, nil, append(common, "--origin", origin.URL)...)
	case "nginx":
		testenv.NginxBin(t)
	case "caddy":
		testenv.CaddyBin(t)
	}
	usher := startCommand(t, "auth", "/_usher/healthz", nil, common...)
	var conf strings.Builder
	if err := run(context.Background(), []string{"auth", "--print", edge, "--origin", origin.URL, "--listen", testenv.ClosedAddr(t),
		"--usher", usher, "--edge-dir", t.TempDir(), "--insecure-cookies"},
		func(string) string { return "" }, &conf, io.Discard); err != nil {
		t.Fatalf("usher auth --print %s: %v", edge, err)
	}
	base := testenv.Caddy
	if edge == "nginx" {
		base = testenv.Nginx
	}
	b := base(t, conf.String())
	aliasAdmin(t, b, usher)
	return b
}

func testOnePlacePerClient(t *testing.T, base string) {
	c := client{t, base}
	for room, settings := range map[string]string{
		"sale": `{"max_active":1,"admit_rate":1,"interval_ms":60000,"pow_bits":8,"client_enters_per_minute":5}`,
		"free": `{"max_active":1,"admit_rate":1,"interval_ms":60000,"pow_bits":0,"client_enters_per_minute":0}`,
	} {
		if st, _, body := c.admin().do("PUT", "/api/v1/rooms/"+room, proxyAdminKey, settings); st != 200 && st != 201 {
			t.Fatalf("room %s: %d %v", room, st, body)
		}
	}
	// ask sends one request as a client without a jar and returns its
	// status, body and the visitor cookie it was given ("" for none).
	ask := func(method, path string, header ...string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, nil)
		req.Header.Set("Accept", "application/json")
		for i := 0; i < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		for _, ck := range res.Cookies() {
			if ck.Name == wire.VisitorCookie {
				return res.StatusCode, string(b), ck.Value
			}
		}
		return res.StatusCode, string(b), ""
	}
	// mint is what the attacker does for a fresh identity: the refused
	// entry first, then the room without defences.
	mint := func() string {
		t.Helper()
		if st, _, vid := ask("POST", "/_usher/api/v1/rooms/no-such-room/entries"); vid != "" {
			t.Errorf("refused entry (%d) minted a visitor cookie", st)
			return vid
		}
		st, body, vid := ask("GET", "/free/x")
		if vid == "" {
			t.Fatalf("newcomer in the room without defences: %d %s, no visitor cookie", st, body)
		}
		return vid
	}
	tookPlace := func(st int, body string) bool {
		return st == http.StatusOK || strings.Contains(body, `"ticket":`)
	}
	for i := range 6 {
		if st, body, _ := ask("GET", "/shop", "Cookie", wire.VisitorCookie+"="+mint()); tookPlace(st, body) || st != http.StatusPreconditionRequired {
			t.Fatalf("attempt %d with a minted cookie, no solution: %d %s; want 428 and no place", i, st, body)
		}
	}
	places, limited := 0, 0
	for range 8 {
		st, body, _ := ask("GET", "/shop")
		var ch struct{ Challenge pow.Challenge }
		if err := json.Unmarshal([]byte(body), &ch); err != nil || st != http.StatusPreconditionRequired || ch.Challenge.Token == "" {
			t.Fatalf("challenge: %d %s", st, body)
		}
		st, body, _ = ask("GET", "/shop", "Cookie", wire.VisitorCookie+"="+mint(),
			pow.Header, ch.Challenge.Token+":"+pow.Solve(ch.Challenge))
		switch {
		case tookPlace(st, body):
			places++
		case st == http.StatusTooManyRequests && strings.Contains(body, "rate_limited"):
			limited++
		default:
			t.Fatalf("solved entry: %d %s", st, body)
		}
	}
	_, _, room := c.admin().do("GET", "/api/v1/rooms/sale", proxyAdminKey, "")
	stats, _ := room["stats"].(map[string]any)
	held, _ := stats["waiting"].(float64)
	active, _ := stats["active"].(float64)
	if places != 5 || limited != 3 || held+active != 5 {
		t.Errorf("solved entries: %d places, %d rate_limited, the room holds %v; want 5, 3 and 5", places, limited, held+active)
	}
}
