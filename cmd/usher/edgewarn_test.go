package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"usher/internal/testenv"
)

// TestPrintedNginxTestsClean: nginx -t takes the printed config without a
// warning, and the config sizes the proxy headers hash, whose defaults make
// nginx 1.22 warn on some machines.
func TestPrintedNginxTestsClean(t *testing.T) {
	t.Parallel()
	bin := testenv.NginxBin(t)
	dir := t.TempDir()
	var conf strings.Builder
	if err := run(context.Background(), []string{"auth", "--print", "nginx", "--origin", "127.0.0.1:9", "--edge-dir", dir,
		"--data-dir", filepath.Join(dir, "data")}, noEnv, &conf, &strings.Builder{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"proxy_headers_hash_max_size 1024;", "proxy_headers_hash_bucket_size 128;"} {
		if !strings.Contains(conf.String(), want) {
			t.Errorf("the printed nginx config lacks %q", want)
		}
	}
	file := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(file, []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-t", "-p", dir, "-c", file).CombinedOutput()
	if err != nil || strings.Contains(string(out), "[warn]") {
		t.Errorf("nginx -t: %v\n%s", err, out)
	}
}
