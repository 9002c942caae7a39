package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"usher/internal/loadlab/simorigin"
)

// startOrigin runs `usher origin` with args until the test ends and returns
// startOrigin runs `usher origin` until the test ends.
func startOrigin(t *testing.T, args ...string) string {
	t.Helper()
	return startCommand(t, "origin", "/healthz", nil, args...)
}

func TestOriginServes(t *testing.T) {
	t.Parallel()
	base := startOrigin(t, "--addr", "127.0.0.1:0", "--conns", "3", "--workers", "7", "--service", "constant:1ms")
	res, err := http.Get(base + "/seats")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET /seats: %v %v", res, err)
	}
	res.Body.Close()
	res, err = http.Get(base + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var st simorigin.Stats
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.Conns != 3 || st.Workers != 7 || st.Served != 1 || st.ServiceDist != "constant:1ms" {
		t.Errorf("stats %+v: want the flags' pools and one request served", st)
	}
}

func TestOriginBadSettings(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--conns", "0"},
		{"--service", "gamma:1s"},
		{"--usher", "http://127.0.0.1:1"},
		{"--timeout", "-1s"},
		{"--addr", "nonsense:-1"},
	} {
		var stderr strings.Builder
		err := origin(context.Background(), args, func(string) string { return "" }, &strings.Builder{}, &stderr)
		if err == nil {
			t.Errorf("origin %v: err = nil, want an error", args)
		}
	}
}
