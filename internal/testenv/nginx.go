package testenv

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// NginxBin returns the nginx binary (Debian's package), skipping the test
// when there is none, or failing it under CI.
func NginxBin(tb testing.TB) string {
	tb.Helper()
	for _, name := range []string{"nginx", "/usr/sbin/nginx"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	Skip(tb, "nginx", "install nginx (apt-get install nginx)")
	return ""
}

// nginxListen finds the address of a configuration's first listen
// directive: host:port, or a bare port (every interface: reached on
// loopback).
var nginxListen = regexp.MustCompile(`(?m)^\s*listen\s+([^\s;]+)`)

// Nginx runs nginx with conf, the text of a whole nginx.conf whose paths
// are all absolute (edgeconf.Nginx renders one), until the test ends, and
// returns the URL of its first listen address once that accepts
// connections. conf is written into a directory of the test's own, which
// is also nginx's prefix (-p).
//
// nginx runs as a single process (-g 'master_process off;', plus
// 'daemon off;' when conf does not say it): a master killed with the test
// binary would leave its workers serving the port, and a single process
// started as root keeps root, so the temporary paths need no permissions
// for a worker user. A missing nginx skips the test, or fails it under CI.
// If the test failed, the end of nginx's stderr (where edgeconf's
// error_log goes) is logged.
func Nginx(tb testing.TB, conf string) string {
	tb.Helper()
	bin := NginxBin(tb)
	m := nginxListen.FindStringSubmatch(conf)
	if m == nil {
		tb.Fatal("nginx configuration has no listen directive")
	}
	addr := m[1]
	if !strings.Contains(addr, ":") {
		addr = "127.0.0.1:" + addr
	}
	dir := tb.TempDir()
	file := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		tb.Fatal(err)
	}
	global := "master_process off;"
	if !regexp.MustCompile(`(?m)^\s*daemon\s+off\s*;`).MatchString(conf) {
		global += " daemon off;"
	}
	startEdge(tb, "nginx", exec.Command(bin, "-p", dir, "-c", file, "-g", global), dir, addr)
	return "http://" + addr
}

// startEdge starts cmd (its output into dir), kills it when the test ends,
// and waits until addr accepts a connection, failing the test if the
// process ends first.
func startEdge(tb testing.TB, name string, cmd *exec.Cmd, dir, addr string) {
	tb.Helper()
	logPath := filepath.Join(dir, name+".out")
	out, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		out.Close()
		tb.Fatalf("%s: %v", name, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); out.Close() }()
	tb.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if tb.Failed() {
			tb.Logf("end of %s's output:\n%s", name, tail(logPath, 40))
		}
	})
	Eventually(tb, 30*time.Second, name+" to accept connections at "+addr, func() bool {
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			tb.Fatalf("%s exited before it served (%v):\n%s", name, err, tail(logPath, 40))
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}
