// Package testenv tells tests where the real services are, and waits for
// conditions without sleeping blindly.
//
// A test that needs a service calls URL: with the variable unset it skips,
// except under CI (CI set), where a missing service is a failure, never a
// skip. A set variable whose service does not answer must fail the test too;
// that is the caller's connect error. A test that needs a program (chromium,
// redis-server) calls Skip when it is missing.
//
// Every skip is recorded: when USHER_TEST_SKIPS names a directory (the
// ./scripts/test command sets it), Skip appends one line per skipped test to
// a file there named after the group, and the script prints one line per
// group at the end, so that a green run never hides what did not run.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// SkipsDir is the environment variable naming the directory where Skip
// records skipped tests.
const SkipsDir = "USHER_TEST_SKIPS"

// URL returns the value of the environment variable name (e.g.
// USHER_TEST_REDIS), skipping the test when it is unset outside CI and
// failing it under CI.
func URL(tb testing.TB, name string) string {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		Skip(tb, name, "set "+name+example(name))
	}
	return v
}

// example shows a value of the variable that works with the services of
// .ci/run.
func example(name string) string {
	switch name {
	case "USHER_TEST_REDIS":
		return "=redis://127.0.0.1:6379/0"
	case "USHER_TEST_REDIS_SENTINEL":
		return "=$(scripts/sentinel.sh url) after scripts/sentinel.sh start"
	case "USHER_TEST_REDIS_CLUSTER":
		return "=$(scripts/cluster.sh url) after scripts/cluster.sh start"
	case "USHER_TEST_POSTGRES":
		return "='postgres://postgres@127.0.0.1:5432/test?sslmode=disable'"
	case "USHER_TEST_MYSQL":
		return "=mysql://root@127.0.0.1:3306/test"
	case "USHER_TEST_NATS":
		return "=nats://127.0.0.1:4222 (a server started with -js)"
	case "USHER_TEST_NATS_CLUSTER":
		return "=$(scripts/nats-cluster.sh url) after scripts/nats-cluster.sh start"
	}
	return ""
}

// Skip skips the test because something it needs is missing: group names
// that thing (a variable such as "USHER_TEST_REDIS", or a program such as
// "chromium"), enable says how to provide it. Under CI it fails the test
// instead. The skip is recorded under USHER_TEST_SKIPS when that is set.
func Skip(tb testing.TB, group, enable string) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatalf("%s is missing under CI: this test needs it (%s)", group, enable)
	}
	if err := record(group, enable, tb.Name()); err != nil {
		tb.Errorf("record the skip under %s: %v", SkipsDir, err)
	}
	tb.Skipf("%s is missing: %s to run this test", group, enable)
}

// record appends "package<TAB>test<TAB>enable" to the group's file. One
// short write with O_APPEND, so test binaries running at once do not
// interleave their lines.
func record(group, enable, test string) error {
	dir := os.Getenv(SkipsDir)
	if dir == "" {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(dir, strings.Map(safe, group)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s\t%s\t%s\n", pkgDir(), test, enable)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func safe(r rune) rune {
	if r == '/' || r == os.PathSeparator || r == 0 {
		return '_'
	}
	return r
}

// pkgDir is the test's package directory relative to the module root: go
// test runs each test binary in its package's directory.
func pkgDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "?"
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if rel, err := filepath.Rel(dir, wd); err == nil {
				return filepath.ToSlash(rel)
			}
			return wd
		}
		if filepath.Dir(dir) == dir {
			return wd
		}
	}
}

// Eventually calls cond until it returns true, and fails the test (naming
// what it waited for) if timeout passes first. It polls often at first and
// then every 50 ms. The timeout is a guard against a hang, not a speed
// requirement: choose it generously (seconds), so that a loaded machine
// never trips it. cond runs on the test's goroutine and may call t.Fatal.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("still waiting for %s after %v", what, timeout)
		}
		time.Sleep(pause)
	}
}

// DataDir returns a new directory for a usher process's --data-dir, removed
// when the test ends. Unlike t.TempDir, a file written while it is removed
// is not a failure: the embedded NATS server waits only 100 ms for a
// consumer's state flush when it stops, so the flush may land after run
// returns (nats-server's consumerFileStore.Stop).
func DataDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "usher-data")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
