package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"usher/internal/loadlab/simorigin"
)

// startOrigin runs `usher origin` with args until the test ends and returns
// its base URL once /healthz answers.
func startOrigin(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- origin(ctx, args, func(string) string { return "" }, stdout, stderr) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("origin returned %v after shutdown, want nil", err)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("origin exited early: %v\n%s", err, stderr)
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
	}
	t.Fatalf("origin did not become healthy\nstdout: %s\nstderr: %s", stdout, stderr)
	return ""
}

func TestOriginServes(t *testing.T) {
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
