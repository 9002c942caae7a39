// Package testenv tells tests where the real services are. A test that needs
// one calls URL: with the variable unset it skips, except under CI (CI set),
// where a missing service is a failure, never a skip. A set variable whose
// service does not answer must fail the test too; that is the caller's
// connect error.
package testenv

import (
	"os"
	"testing"
)

// URL returns the value of the environment variable name (e.g.
// USHER_TEST_REDIS), skipping the test when it is unset outside CI and
// failing it under CI.
func URL(tb testing.TB, name string) string {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%s is not set under CI: this test needs the real service", name)
		}
		tb.Skipf("%s not set: set it (see .ci/run) to run this test against the real service", name)
	}
	return v
}
