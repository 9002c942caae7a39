package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"usher/internal/mq/natsmq"
	"usher/internal/testenv"
)

// aFile returns a regular file: a data directory under it cannot be made,
// even by root, for whom permissions do not stop a write.
func aFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// busyAddr returns an address that a listener of the test holds.
func busyAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// postgresDB is USHER_TEST_POSTGRES on another database (skipped when the
// variable is unset).
func postgresDB(t *testing.T, db string) string {
	t.Helper()
	u, err := url.Parse(testenv.URL(t, "USHER_TEST_POSTGRES"))
	if err != nil {
		t.Fatalf("USHER_TEST_POSTGRES: %v", err)
	}
	u.Path = "/" + db
	return u.String()
}

// TestStartFailuresWriteNothing: a port in use, a service that does not
// answer, a database that does not exist, a data directory that cannot be
// written or a bad value stops the command with an error of one line that
// names the flag and the cause, and leaves nothing in the data directory.
func TestStartFailuresWriteNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// args builds the command line; dataDir is the --data-dir given.
		args        func(t *testing.T, dataDir string) []string
		flag, cause string
	}{
		{"serve port in use", func(t *testing.T, d string) []string {
			return []string{"serve", "--data-dir", d, "--addr", busyAddr(t)}
		}, "--addr", "address already in use"},
		{"serve metrics port in use", func(t *testing.T, d string) []string {
			return []string{"serve", "--data-dir", d, "--addr", "127.0.0.1:0", "--metrics-addr", busyAddr(t)}
		}, "--metrics-addr", "address already in use"},
		{"serve Redis down", func(t *testing.T, d string) []string {
			return []string{"serve", "--data-dir", d, "--addr", "127.0.0.1:0", "--store", "redis://" + testenv.ClosedAddr(t) + "/0"}
		}, "--store", "connection refused"},
		{"serve NATS down", func(t *testing.T, d string) []string {
			return []string{"serve", "--data-dir", d, "--addr", "127.0.0.1:0", "--nats", "nats://" + testenv.ClosedAddr(t)}
		}, "--nats", "no servers available"},
		{"serve Kafka down", func(t *testing.T, d string) []string {
			return []string{"serve", "--data-dir", d, "--addr", "127.0.0.1:0", "--events", "kafka://" + testenv.ClosedAddr(t)}
		}, "--events", "no broker of"},
		{"collect Kafka down", func(t *testing.T, d string) []string {
			return []string{"collect", "--data-dir", d, "--kafka", "kafka://" + testenv.ClosedAddr(t)}
		}, "--kafka", "no broker of"},
		{"serve misspelt database", func(t *testing.T, d string) []string {
			return []string{"serve", "--data-dir", d, "--addr", "127.0.0.1:0", "--db", postgresDB(t, "nosuchdb")}
		}, "--db", `database "nosuchdb" does not exist`},
		{"serve missing schema", func(t *testing.T, d string) []string {
			db := testenv.WithParam(t, testenv.URL(t, "USHER_TEST_POSTGRES"), "search_path", "usher_no_such_schema")
			return []string{"serve", "--data-dir", d, "--addr", "127.0.0.1:0", "--db", db}
		}, "--db", "usher_no_such_schema"},
		{"serve data dir under a file", func(t *testing.T, _ string) []string {
			return []string{"serve", "--data-dir", filepath.Join(aFile(t), "data"), "--addr", "127.0.0.1:0"}
		}, "--data-dir", "is a file, not a directory"},
		{"serve keys dir under a file", func(t *testing.T, d string) []string {
			return []string{"serve", "--data-dir", d, "--addr", "127.0.0.1:0", "--keys-dir", filepath.Join(aFile(t), "keys")}
		}, "--keys-dir", "is a file, not a directory"},
		{"serve bad value", func(t *testing.T, d string) []string {
			return []string{"serve", "--data-dir", d, "--addr", "127.0.0.1:0", "--hold-ttl", "0s"}
		}, "--hold-ttl", "want more than 0"},
		{"serve hold store down", func(t *testing.T, d string) []string {
			return []string{"serve", "--data-dir", d, "--addr", "127.0.0.1:0", "--hold-store", "redis://" + testenv.ClosedAddr(t) + "/0"}
		}, "--hold-store", "connection refused"},
		{"serve bad limit store", func(t *testing.T, d string) []string {
			return []string{"serve", "--data-dir", d, "--addr", "127.0.0.1:0", "--limit-store", "mem"}
		}, "--limit-store", "want memory"},
		{"serve bad store", func(t *testing.T, d string) []string {
			return []string{"serve", "--data-dir", d, "--addr", "127.0.0.1:0", "--store", "mem"}
		}, "--store", "want memory"},
		{"proxy port in use", func(t *testing.T, d string) []string {
			return []string{"proxy", "--data-dir", d, "--addr", busyAddr(t), "--origin", "http://" + testenv.ClosedAddr(t)}
		}, "--addr", "address already in use"},
		{"proxy header bound too small", func(t *testing.T, d string) []string {
			return []string{"proxy", "--data-dir", d, "--addr", "127.0.0.1:0", "--origin", "http://" + testenv.ClosedAddr(t), "--max-header-bytes", "1024"}
		}, "--max-header-bytes/USHER_PROXY_MAX_HEADER_BYTES", "want at least 4096"},
		{"serve no header timeout", func(t *testing.T, d string) []string {
			return []string{"serve", "--data-dir", d, "--addr", "127.0.0.1:0", "--header-timeout", "0s"}
		}, "--header-timeout/USHER_HEADER_TIMEOUT", "want more than 0"},
		{"proxy data dir under a file", func(t *testing.T, _ string) []string {
			return []string{"proxy", "--data-dir", filepath.Join(aFile(t), "data"), "--addr", "127.0.0.1:0", "--origin", "http://" + testenv.ClosedAddr(t)}
		}, "--data-dir", "is a file, not a directory"},
		{"auth Redis down", func(t *testing.T, d string) []string {
			return []string{"auth", "--data-dir", d, "--addr", "127.0.0.1:0", "--store", "redis://" + testenv.ClosedAddr(t) + "/0"}
		}, "--store", "connection refused"},
		{"auth bad release address", func(t *testing.T, d string) []string {
			return []string{"auth", "--data-dir", d, "--addr", "127.0.0.1:0", "--release-listen", "127.0.0.1:nosuchport"}
		}, "--release-listen", "unknown port"},
		{"seed data dir under a file", func(t *testing.T, _ string) []string {
			return []string{"seed", "--data-dir", filepath.Join(aFile(t), "data"), "--seats", "1"}
		}, "--data-dir", "is a file, not a directory"},
		{"collect NATS down", func(t *testing.T, d string) []string {
			return []string{"collect", "--data-dir", d, "--nats", "nats://" + testenv.ClosedAddr(t)}
		}, "--nats", "no servers available"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			parent := testenv.DataDir(t)
			dataDir := filepath.Join(parent, "data")
			args := tc.args(t, dataDir)
			if slices.Contains([]string{"serve", "proxy", "auth"}, args[0]) {
				args = append(args[:1], withAdminAddr(args[0], args[1:], nil)...)
			}
			err := run(context.Background(), args, noEnv, io.Discard, io.Discard)
			if err == nil {
				t.Fatalf("usher %v: err = nil, want a failure naming %s", args, tc.flag)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.flag) || !strings.Contains(msg, tc.cause) {
				t.Errorf("usher %v: err = %q, want one naming %s and %q", args, msg, tc.flag, tc.cause)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("usher %v: err = %q, want one line (the last line is the one read)", args, msg)
			}
			if strings.Count(msg, "bad setting") > 1 {
				t.Errorf("usher %v: err = %q, want \"bad setting\" once at most", args, msg)
			}
			if entries, _ := os.ReadDir(parent); len(entries) > 0 {
				t.Errorf("usher %v left %s in the data directory's parent, want nothing (not even the directory)", args, entries[0].Name())
			}
		})
	}
}

// TestCheckWritable: the probe tells a directory that can be written from
// one that cannot, and leaves nothing behind either way.
func TestCheckWritable(t *testing.T) {
	t.Parallel()
	file := aFile(t)
	for _, tc := range []struct {
		name, dir string
		want      string // "" for no error
	}{
		{"existing", t.TempDir(), ""},
		{"missing", filepath.Join(t.TempDir(), "a", "b"), ""},
		{"a file", file, "is a file, not a directory"},
		{"under a file", filepath.Join(file, "data"), "is a file, not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := filepath.Dir(tc.dir)
			before, _ := os.ReadDir(parent)
			err := checkWritable(`--data-dir/USHER_DATA_DIR="x"`, tc.dir)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("checkWritable(%s) = %v, want nil", tc.dir, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "--data-dir")):
				t.Errorf("checkWritable(%s) = %v, want an error starting with --data-dir and naming %q", tc.dir, err, tc.want)
			}
			if after, _ := os.ReadDir(parent); len(after) != len(before) {
				t.Errorf("checkWritable(%s) left %d entries in %s, want %d", tc.dir, len(after), parent, len(before))
			}
			if entries, _ := os.ReadDir(tc.dir); len(entries) > 0 {
				t.Errorf("checkWritable(%s) left %s behind", tc.dir, entries[0].Name())
			}
		})
	}
}

// TestEmbeddedNATSFailsWithItsCause: the embedded NATS server that cannot
// start JetStream fails at once with the server's reason, not after its
// start-up wait with none.
func TestEmbeddedNATSFailsWithItsCause(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(aFile(t), "data")
	var cl closers
	defer cl.Close()
	_, _, err := openBroker(context.Background(), "embedded", natsmq.Options{Name: "usher", Replicas: 1}, dataDir, slog.New(slog.DiscardHandler), &cl)
	if err == nil || !strings.Contains(err.Error(), "--data-dir") || !strings.Contains(err.Error(), "JetStream") {
		t.Fatalf("openBroker(embedded) under a file = %v, want an error naming --data-dir and JetStream's cause", err)
	}
}
