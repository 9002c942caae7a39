package testenv

import (
	"os/exec"
	"testing"
)

// Chromium returns the chromium binary (Debian's package) for the browser
// tests, skipping the test when there is none, or failing it under CI.
func Chromium(tb testing.TB) string {
	tb.Helper()
	for _, name := range []string{"chromium", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	Skip(tb, "chromium", "install chromium (apt-get install chromium)")
	return ""
}
