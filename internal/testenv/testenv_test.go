package testenv_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"usher/internal/testenv"
)

// TestSkipRecords: a skip outside CI is recorded under USHER_TEST_SKIPS,
// one line per test, in a file named after the group.
func TestSkipRecords(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(testenv.SkipsDir, dir)
	t.Setenv("CI", "")
	t.Setenv("USHER_TEST_NOTHING", "")
	for _, name := range []string{"a", "b"} {
		t.Run(name, func(t *testing.T) { testenv.URL(t, "USHER_TEST_NOTHING") })
	}
	t.Run("c", func(t *testing.T) { testenv.Skip(t, "some/program", "install it") })
	b, err := os.ReadFile(filepath.Join(dir, "USHER_TEST_NOTHING"))
	if err != nil {
		t.Fatal(err)
	}
	want := "internal/testenv\tTestSkipRecords/a\tset USHER_TEST_NOTHING\n" +
		"internal/testenv\tTestSkipRecords/b\tset USHER_TEST_NOTHING\n"
	if string(b) != want {
		t.Errorf("recorded %q, want %q", b, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "some_program")); err != nil || !strings.HasSuffix(string(b), "\tinstall it\n") {
		t.Errorf("recorded %q, %v; want a line in some_program", b, err)
	}
}

func TestEventually(t *testing.T) {
	t.Parallel()
	n := 0
	testenv.Eventually(t, time.Minute, "the third call", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("cond called %d times, want 3 (until it held)", n)
	}
}
