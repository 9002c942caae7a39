package testenv_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"usher/internal/testenv"
)

// get fetches url and returns its status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestNginx: a whole nginx.conf with only absolute paths in the test's
// directory runs, answers at its listen address, and is gone when the test
// ends.
func TestNginx(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := testenv.ClosedAddr(t)
	var base string
	t.Run("run", func(t *testing.T) {
		base = testenv.Nginx(t, fmt.Sprintf(`pid %[1]s/nginx.pid;
error_log stderr;
events {}
http {
	access_log %[1]s/access.log;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	server {
		listen %[2]s;
		location / { return 200 "nginx $request_uri\n"; }
	}
}
`, dir, addr))
		if base != "http://"+addr {
			t.Errorf("base URL %s, want http://%s", base, addr)
		}
		if code, body := get(t, base+"/x?y"); code != 200 || body != "nginx /x?y\n" {
			t.Errorf("GET /x?y: %d %q", code, body)
		}
	})
	if _, err := http.Get(base); err == nil {
		t.Error("nginx still answers after its test ended")
	}
}

// TestCaddy: a Caddyfile with no admin endpoint and no automatic HTTPS
// runs with its storage in the test's directory, answers at its site
// address, and is gone when the test ends.
func TestCaddy(t *testing.T) {
	t.Parallel()
	addr := testenv.ClosedAddr(t)
	host, port, _ := strings.Cut(addr, ":")
	var base string
	t.Run("run", func(t *testing.T) {
		base = testenv.Caddy(t, fmt.Sprintf(`{
	admin off
	auto_https off
}

http://:%s {
	bind %s
	respond "caddy {uri}"
}
`, port, host))
		if base != "http://"+addr {
			t.Errorf("base URL %s, want http://%s", base, addr)
		}
		if code, body := get(t, base+"/x?y"); code != 200 || body != "caddy /x?y" {
			t.Errorf("GET /x?y: %d %q", code, body)
		}
	})
	if _, err := http.Get(base); err == nil {
		t.Error("caddy still answers after its test ended")
	}
}
