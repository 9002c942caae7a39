package testenv

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// CaddyBin returns the caddy binary (Debian's package), skipping the test
// when there is none, or failing it under CI.
func CaddyBin(tb testing.TB) string {
	tb.Helper()
	for _, name := range []string{"caddy", "/usr/bin/caddy"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	Skip(tb, "caddy", "install caddy (apt-get install caddy)")
	return ""
}

var (
	// caddySite finds the port of the first site address that names one
	// (http://:8080, http://localhost:8080, :8080); caddyBind its host.
	caddySite = regexp.MustCompile(`(?m)^(?:https?://)?[^\s{]*:(\d+)[\s,{]`)
	caddyBind = regexp.MustCompile(`(?m)^\s+bind\s+(\S+)`)
)

// CaddyEnv is the environment a test's caddy runs with: HOME and the XDG
// directories in dir, so that Caddy's storage, autosaved configuration and
// cache stay in the test's own directory.
func CaddyEnv(dir string) []string {
	env := os.Environ()
	for _, kv := range []string{"HOME=", "XDG_DATA_HOME=", "XDG_CONFIG_HOME=", "XDG_CACHE_HOME="} {
		env = append(env, kv+filepath.Join(dir, kv[:len(kv)-1]))
	}
	return env
}

// Caddy runs `caddy run` with caddyfile (a whole Caddyfile; edgeconf.Caddy
// renders one) until the test ends, and returns the URL of its first site
// address once that accepts connections: the port of the first site
// address that has one, on the first bind host (127.0.0.1 without one).
// caddyfile is written into a directory of the test's own, which is also
// HOME and the XDG directories (CaddyEnv). A missing caddy skips the test,
// or fails it under CI. If the test failed, the end of Caddy's log is
// logged.
func Caddy(tb testing.TB, caddyfile string) string {
	tb.Helper()
	bin := CaddyBin(tb)
	m := caddySite.FindStringSubmatch(caddyfile)
	if m == nil {
		tb.Fatal("Caddyfile has no site address with a port")
	}
	host := "127.0.0.1"
	if b := caddyBind.FindStringSubmatch(caddyfile); b != nil && b[1] != "0.0.0.0" && b[1] != "::" {
		host = b[1]
	}
	addr := net.JoinHostPort(host, m[1])
	dir := tb.TempDir()
	file := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(file, []byte(caddyfile), 0o644); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--adapter", "caddyfile", "--config", file)
	cmd.Dir = dir
	cmd.Env = CaddyEnv(dir)
	startEdge(tb, "caddy", cmd, dir, addr)
	return "http://" + addr
}
