package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"usher/internal/testenv"
)

// nodeBin returns the path of node, version 20 or later (the connector's
// own crypto and test runner). It skips without one, and fails under CI.
func nodeBin(tb testing.TB) string {
	tb.Helper()
	const enable = "install Node.js 20 or later (nodesource's nodejs package)"
	bin, err := exec.LookPath("node")
	if err != nil {
		testenv.Skip(tb, "node", enable)
	}
	out, err := exec.Command(bin, "--version").Output()
	m := regexp.MustCompile(`^v(\d+)\.`).FindSubmatch(out)
	if err != nil || m == nil {
		tb.Fatalf("node --version: %q, %v", out, err)
	}
	if major, _ := strconv.Atoi(string(m[1])); major < 20 {
		testenv.Skip(tb, "node", enable+" (found "+string(bytes.TrimSpace(out))+")")
	}
	return bin
}

// connectorsDir is the connectors' directory, from this package's.
var connectorsDir = filepath.Join("..", "..", "connectors")

// TestConnectorNode runs the Node connector's tests (node --test
// connectors/node: the conformance vectors, and test/usher.test.js
// against a live usher) with a usher auth built from this tree. The Node
// test finds it in USHER_TEST_URL, its admin listener in
// USHER_TEST_ADMIN_URL and USHER_TEST_ADMIN_KEY, and asks for a key
// rotation at USHER_TEST_CONTROL: POST /rotate stages a new key (usher
// keys rotate, active at once) and restarts usher auth on the same
// addresses, as an operator does, and answers 204 once it serves again.
func TestConnectorNode(t *testing.T) {
	t.Parallel()
	node := nodeBin(t)
	dir := testenv.DataDir(t)
	const adminKey = "connector-test-admin-key-0123456789"
	addr, adminAddr := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)
	args := []string{"--data-dir", dir, "--addr", addr, "--admin-addr", adminAddr, "--admin-key", adminKey,
		"--insecure-cookies", "--room", "sale", "--route", "/brief/=brief"}
	in := startAuth(t, args...)

	rotations := make(chan chan error)
	control := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/rotate" {
			http.NotFound(w, r)
			return
		}
		done := make(chan error, 1)
		rotations <- done
		if err := <-done; err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer control.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=tap", filepath.Join(connectorsDir, "node"))
	cmd.Env = append(os.Environ(),
		"USHER_TEST_URL="+in.base,
		"USHER_TEST_ADMIN_URL=http://"+adminAddr,
		"USHER_TEST_ADMIN_KEY="+adminKey,
		"USHER_TEST_CONTROL="+control.URL,
	)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		select {
		case done := <-rotations:
			// On the test's goroutine: startAuth may fail the test.
			var buf bytes.Buffer
			err := run(ctx, []string{"keys", "rotate", "--data-dir", dir}, func(string) string { return "" }, &buf, io.Discard)
			if err == nil {
				t.Logf("rotate: %s", bytes.TrimSpace(buf.Bytes()))
				in.stop()
				in = startAuth(t, args...)
			}
			done <- err
		case err := <-exited:
			if err != nil {
				t.Fatalf("node --test connectors/node: %v\n%s", err, out.String())
			}
			for _, want := range []string{"# fail 0", "# skipped 0", "# cancelled 0"} {
				if !bytes.Contains([]byte(out.String()), []byte(want)) {
					t.Errorf("node --test connectors/node: no %q in its report:\n%s", want, out.String())
				}
			}
			if testing.Verbose() {
				t.Log(out.String())
			}
			return
		}
	}
}
